// Covers the bounds an import checks beyond the fields themselves (strides expressible in bytes,
// byte_offset within the address space), a Tensor over a context without memory, and the pool's
// allocation-free exhaustion error.
#include <gtest/gtest.h>

#include <climits>
#include <cstdint>
#include <memory>
#include <string>

#include "holoscan/tensor.hpp"
#include "holoscan/tensor_pool.hpp"
#include "support/gtest_printers.hpp"

namespace holoscan {
namespace {

// A managed tensor built by hand, for values a real allocation cannot carry.
struct HandMadeTensor {
  float data[4] = {0, 1, 2, 3};
  std::int64_t shape[2] = {2, 2};
  std::int64_t strides[2] = {2, 1};
  int deleter_calls = 0;
  DLManagedTensorVersioned managed{};

  HandMadeTensor() {
    managed.version = {DLPACK_MAJOR_VERSION, 0};
    managed.manager_ctx = this;
    managed.deleter = [](DLManagedTensorVersioned* self) {
      ++static_cast<HandMadeTensor*>(self->manager_ctx)->deleter_calls;
    };
    managed.dl_tensor.data = data;
    managed.dl_tensor.device = {kDLCPU, 0};
    managed.dl_tensor.ndim = 2;
    managed.dl_tensor.dtype = {kDLFloat, 32, 1};
    managed.dl_tensor.shape = shape;
    managed.dl_tensor.strides = strides;
  }
};

void expect_rejected(HandMadeTensor& tensor, const std::string& field) {
  auto result = make_tensor_from_dlpack_versioned(&tensor.managed);
  ASSERT_FALSE(result.has_value());
  EXPECT_EQ(result.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(result.error().message.find(field), std::string::npos) << result.error().message;
  EXPECT_EQ(tensor.deleter_calls, 1);
}

TEST(ImportBounds, StrideTooLargeForBytesIsRejected) {
  HandMadeTensor tensor;
  tensor.strides[0] = INT64_MAX / 2;  // fits in elements, not once multiplied by 4 bytes
  expect_rejected(tensor, "strides[0]");
}

TEST(ImportBounds, MostNegativeStrideIsRejected) {
  HandMadeTensor tensor;
  tensor.strides[1] = INT64_MIN;
  expect_rejected(tensor, "strides[1]");
}

TEST(ImportBounds, NegativeStrideIsAccepted) {
  HandMadeTensor tensor;
  tensor.strides[0] = -2;  // a reversed view, as NumPy exports
  {
    auto result = make_tensor_from_dlpack_versioned(&tensor.managed);
    ASSERT_TRUE(result.has_value()) << result.error().message;
    EXPECT_EQ(result->strides(), (std::vector<std::int64_t>{-8, 4}));
  }
  EXPECT_EQ(tensor.deleter_calls, 1);
}

TEST(ImportBounds, ByteOffsetBeyondInt64IsRejected) {
  HandMadeTensor tensor;
  tensor.managed.dl_tensor.byte_offset = static_cast<std::uint64_t>(INT64_MAX) + 1;
  expect_rejected(tensor, "byte_offset");
}

TEST(ImportBounds, ByteOffsetWrappingTheAddressIsRejected) {
  HandMadeTensor tensor;
  tensor.managed.dl_tensor.data = reinterpret_cast<void*>(UINTPTR_MAX - 8);
  tensor.managed.dl_tensor.byte_offset = 64;
  expect_rejected(tensor, "byte_offset");
}

TEST(TensorContext, ContextWithoutMemoryGivesAnEmptyTensor) {
  auto context = std::make_shared<detail::TensorContext>();
  Tensor tensor(context);
  EXPECT_FALSE(static_cast<bool>(tensor));
  EXPECT_EQ(tensor.memory_reference(), nullptr);
  EXPECT_FALSE(tensor.set_readiness_stream(nullptr));
  auto exported = tensor.to_dlpack_versioned();
  ASSERT_FALSE(exported.has_value());
  EXPECT_EQ(exported.error().code, ErrorCode::kInvalidArgument);
}

TEST(TensorPoolErrors, ExhaustionMessageNeedsNoHeap) {
  TensorPoolConfig config;
  config.memory = PoolMemory::kHost;
  config.block_bytes = 256;
  config.block_count = 1;
  auto pool = TensorPool::create(config);
  ASSERT_TRUE(pool.has_value()) << pool.error().message;
  auto held = (*pool)->allocate({4}, DLDataType{kDLFloat, 32, 1});
  ASSERT_TRUE(held.has_value());
  auto refused = (*pool)->allocate({4}, DLDataType{kDLFloat, 32, 1});
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, ErrorCode::kResourceExhausted);
  EXPECT_EQ(refused.error().message, "pool exhausted");
  // libstdc++ keeps up to 15 characters inside the string object itself.
  EXPECT_LE(refused.error().message.size(), 15u);
}

}  // namespace
}  // namespace holoscan
