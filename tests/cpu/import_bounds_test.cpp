// Covers the bounds an import checks beyond the fields themselves (strides expressible in bytes,
// byte_offset and the addressed span within int64 and the address space), a Tensor over a context
// without memory, and the pool's allocation-free exhaustion error.
#include <gtest/gtest.h>

#include <climits>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

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

// A rejection leaves ownership with the caller: no deleter ran until the caller runs it.
void expect_rejected(HandMadeTensor& tensor, const std::string& field) {
  auto result = make_tensor_from_dlpack_versioned(&tensor.managed);
  ASSERT_FALSE(result.has_value());
  EXPECT_EQ(result.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(result.error().message.find(field), std::string::npos) << result.error().message;
  EXPECT_EQ(tensor.deleter_calls, 0);
  tensor.managed.deleter(&tensor.managed);
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

TEST(ImportBounds, StrideSpanBeyondInt64IsRejected) {
  HandMadeTensor tensor;  // float32 {2, 2}: element 1 of dimension 0 lies INT64_MAX / 4 * 4 away
  tensor.shape[0] = 3;
  tensor.strides[0] = INT64_MAX / 4;
  expect_rejected(tensor, "span");
}

TEST(ImportBounds, ByteOffsetPlusSpanBeyondInt64IsRejected) {
  HandMadeTensor tensor;
  tensor.managed.dl_tensor.byte_offset = static_cast<std::uint64_t>(INT64_MAX) - 8;
  expect_rejected(tensor, "byte_offset");
}

TEST(ImportBounds, NegativeSpanBelowTheAddressSpaceIsRejected) {
  HandMadeTensor tensor;
  tensor.strides[0] = -(INT64_MAX / 8);
  tensor.managed.dl_tensor.data = reinterpret_cast<void*>(std::uintptr_t{4096});
  // The fields at fault are named: data and the strides' reach below it, not byte_offset alone.
  expect_rejected(tensor, "data 0x1000 with byte_offset 0 and the strides' span (" +
                              std::to_string(INT64_MAX / 8 * 4) +
                              " bytes before the first element, 8 from it) leaves the address "
                              "space");
}

TEST(ImportBounds, ZeroSizeWhoseFirstExtentTimesTheRestWouldOverflowKeepsExactStrides) {
  // {8, INT64_MAX / 4, 0} float32: no element, every compact stride fits in bytes; only the
  // product of every extent but the zero (no stride of any dimension) would not fit int64.
  HandMadeTensor tensor;
  std::int64_t shape[3] = {8, INT64_MAX / 4, 0};
  tensor.managed.dl_tensor.ndim = 3;
  tensor.managed.dl_tensor.shape = shape;
  tensor.managed.dl_tensor.strides = nullptr;
  tensor.managed.dl_tensor.data = nullptr;
  {
    auto result = make_tensor_from_dlpack_versioned(&tensor.managed);
    ASSERT_TRUE(result.has_value()) << result.error().message;
    EXPECT_EQ(result->strides(), (std::vector<std::int64_t>{INT64_MAX / 4 * 4, 4, 4}));
    EXPECT_EQ(result->size(), 0);
  }
  EXPECT_EQ(tensor.deleter_calls, 1);
}

TEST(ImportBounds, ZeroSizeWithHugeExtentIsRejectedForItsStrides) {
  HandMadeTensor tensor;  // {0, INT64_MAX} float32: the compact stride of dim 0 overflows in bytes
  tensor.shape[0] = 0;
  tensor.shape[1] = INT64_MAX;
  tensor.managed.dl_tensor.strides = nullptr;
  expect_rejected(tensor, "compact stride");
}

TEST(ImportBounds, ZeroSizeWithLargeExtentKeepsExactStrides) {
  HandMadeTensor tensor;  // {0, INT64_MAX / 4} float32: strides fit in bytes
  tensor.shape[0] = 0;
  tensor.shape[1] = INT64_MAX / 4;
  tensor.managed.dl_tensor.strides = nullptr;
  {
    auto result = make_tensor_from_dlpack_versioned(&tensor.managed);
    ASSERT_TRUE(result.has_value()) << result.error().message;
    EXPECT_EQ(result->strides(), (std::vector<std::int64_t>{INT64_MAX / 4 * 4, 4}));
    EXPECT_EQ(result->size(), 0);
    EXPECT_EQ(result->nbytes(), 0);
    auto* exported = result->to_dlpack_versioned().value();
    auto again = make_tensor_from_dlpack_versioned(exported);
    ASSERT_TRUE(again.has_value()) << again.error().message;
    EXPECT_EQ(again->strides(), result->strides());
  }
  EXPECT_EQ(tensor.deleter_calls, 1);
}

TEST(TensorContext, ContextWithoutMemoryIsAViewWithoutHooks) {
  auto context = std::make_shared<DLManagedTensorContext>();
  Tensor tensor(context);
  EXPECT_TRUE(static_cast<bool>(tensor));
  EXPECT_EQ(tensor.memory_reference(), nullptr);
  EXPECT_EQ(tensor.size(), 1);  // a 0-d tensor
  EXPECT_FALSE(tensor.set_readiness_stream(nullptr));
  EXPECT_FALSE(tensor.set_deallocation_stream(nullptr));
  EXPECT_EQ(tensor.synchronize_for_consumer_stream(nullptr).error().code,
            ErrorCode::kNotImplemented);
}

TEST(TensorContext, EmptyTensorRefusesExport) {
  const Tensor tensor;
  auto exported = tensor.to_dlpack_versioned();
  ASSERT_FALSE(exported.has_value());
  EXPECT_EQ(exported.error().code, ErrorCode::kInvalidArgument);
  auto legacy = tensor.to_dlpack();  // never throws (Holoscan 5.0)
  ASSERT_FALSE(legacy.has_value());
  EXPECT_EQ(legacy.error().code, ErrorCode::kInvalidArgument);
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
