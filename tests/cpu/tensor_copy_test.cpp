// Covers Tensor::copy, copy_to, copy_to_host and copy_to_host_async for host memory (no CUDA, no
// GPU): every stride pattern gathered right, the copy owning its memory with writer authority,
// the source's deleter once, and each refusal with its code. The stream-ordered paths run against
// the fake CUDA runtime in tensor_copy_stream_test.cpp.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "holoscan/tensor.hpp"
#include "holoscan/tensor_pool.hpp"
#include "support/counting_producer.hpp"
#include "support/gtest_printers.hpp"
#include "support/strided_views.hpp"
#include "support/tensor_helpers.hpp"

namespace holoscan {
namespace {

using test::StridedCase;

std::vector<std::int32_t> values_of(const Tensor& compact) {
  const auto* first = static_cast<const std::int32_t*>(compact.data());
  return std::vector<std::int32_t>(first, first + compact.size());
}

class HostCopy : public ::testing::TestWithParam<StridedCase> {
 protected:
  std::vector<std::int32_t> buffer_ = test::numbered_buffer(128);
  std::shared_ptr<int> deleted_ = std::make_shared<int>(0);
};

TEST_P(HostCopy, GathersEveryStridePatternIntoACompactWritableCopy) {
  const StridedCase& view = GetParam();
  {
    const Tensor source = test::import_view(buffer_, view, deleted_);
    ASSERT_TRUE(source);
    auto copy = source.copy(nullptr);  // host memory: the stream is never used
    ASSERT_TRUE(copy.has_value()) << copy.error().message;
    EXPECT_EQ(copy->device().device_type, kDLCPU);
    EXPECT_EQ(copy->shape(), source.shape());
    EXPECT_TRUE(copy->is_contiguous());
    EXPECT_FALSE(copy->is_read_only());
    EXPECT_EQ(copy->flags(), static_cast<std::uint64_t>(DLPACK_FLAG_BITMASK_IS_COPIED));
    EXPECT_FALSE(copy->has_readiness_stream_contract());
    EXPECT_EQ(values_of(*copy), test::gathered(buffer_, view));
    if (source.size() > 0) {
      EXPECT_NE(copy->data(), source.data());
      ASSERT_TRUE(copy->mutable_data().has_value());
    }
  }
  EXPECT_EQ(*deleted_, 1);
}

TEST_P(HostCopy, CopyToHostFillsTheCallersBuffer) {
  const StridedCase& view = GetParam();
  const Tensor source = test::import_view(buffer_, view, deleted_);
  ASSERT_TRUE(source);
  const std::vector<std::int32_t> expected_values = test::gathered(buffer_, view);
  std::vector<std::int32_t> out(expected_values.size() + 1, -1);
  ASSERT_TRUE(source.copy_to_host(out.data(), out.size() * 4, nullptr).has_value());
  EXPECT_EQ(std::vector<std::int32_t>(out.begin(), out.end() - 1), expected_values);
  EXPECT_EQ(out.back(), -1);  // nothing written past nbytes()
  std::vector<std::int32_t> async_out(expected_values.size() + 1, -1);
  ASSERT_TRUE(source.copy_to_host_async(async_out.data(), async_out.size() * 4, nullptr));
  EXPECT_EQ(async_out, out);  // host memory: done on return
}

INSTANTIATE_TEST_SUITE_P(EveryStride, HostCopy, ::testing::ValuesIn(test::strided_cases()),
                         [](const ::testing::TestParamInfo<StridedCase>& param) {
                           return param.param.name;
                         });

TEST(HostCopyRefusals, EmptySourceNullAndSmallDestination) {
  const Tensor empty;
  EXPECT_EQ(empty.copy(nullptr).error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(empty.copy_to(DLDevice{kDLCPU, 0}, nullptr).error().code, ErrorCode::kInvalidArgument);
  std::int32_t out[12] = {};
  EXPECT_EQ(empty.copy_to_host(out, sizeof(out), nullptr).error().code,
            ErrorCode::kInvalidArgument);

  std::vector<std::int32_t> buffer = test::numbered_buffer(12);
  auto deleted = std::make_shared<int>(0);
  {
    const Tensor source = test::import_view(buffer, test::strided_cases()[1], deleted);
    // A host target's negative id is refused as an import refuses it, not quietly made 0.
    auto negative = source.copy_to(DLDevice{kDLCPU, -1}, nullptr);
    ASSERT_FALSE(negative.has_value());
    EXPECT_EQ(negative.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(negative.error().message.find("device id -1 is negative"), std::string::npos)
        << negative.error().message;
    // Host memory has no device of its own: a copy asked for on host device 7 was made on 0.
    for (const DLDeviceType type : {kDLCPU, kDLCUDAHost, kDLCUDAManaged}) {
      auto elsewhere = source.copy_to(DLDevice{type, 7}, nullptr);
      ASSERT_FALSE(elsewhere.has_value());
      EXPECT_EQ(elsewhere.error().code, ErrorCode::kInvalidArgument);
      EXPECT_NE(elsewhere.error().message.find("Tensor copy target device is unsupported: (" +
                                               std::to_string(type) +
                                               ", 7) names a host device other than 0"),
                std::string::npos)
          << elsewhere.error().message;
    }
    auto null_destination = source.copy_to_host(nullptr, 48, nullptr);
    ASSERT_FALSE(null_destination.has_value());
    EXPECT_EQ(null_destination.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(null_destination.error().message.find("destination is null"), std::string::npos);
    auto small = source.copy_to_host(out, 47, nullptr);
    ASSERT_FALSE(small.has_value());
    EXPECT_EQ(small.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(small.error().message.find("too small"), std::string::npos);
    auto vulkan = source.copy_to(DLDevice{kDLVulkan, 0}, nullptr);
    ASSERT_FALSE(vulkan.has_value());
    EXPECT_EQ(vulkan.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(vulkan.error().message.find("target device is unsupported"), std::string::npos);
  }
  EXPECT_EQ(*deleted, 1);
}

TEST(HostCopyRefusals, SourceOnAnUnsupportedDevice) {
  test::CountingProducer producer;
  test::TensorSpec spec;
  spec.device = {kDLVulkan, 0};
  {
    const Tensor source = test::import_or_die(producer, spec);
    auto copy = source.copy_to(DLDevice{kDLCPU, 0}, nullptr);
    ASSERT_FALSE(copy.has_value());
    EXPECT_EQ(copy.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(copy.error().message.find("source device is unsupported"), std::string::npos);
  }
  EXPECT_EQ(producer.deleter_calls(), 1);
}

TEST(HostCopy, TheCopyDoesNotKeepTheSourceAlive) {
  std::vector<std::int32_t> buffer = test::numbered_buffer(24);
  auto deleted = std::make_shared<int>(0);
  Tensor source = test::import_view(buffer, test::strided_cases()[0], deleted);
  auto copy = source.copy(nullptr);
  ASSERT_TRUE(copy.has_value()) << copy.error().message;
  source = Tensor();
  EXPECT_EQ(*deleted, 1);  // a host copy is complete: the source may go at once
  EXPECT_EQ(values_of(*copy)[23], 1023);
}

TEST(HostCopy, IntoAHostPoolBlock) {
  auto pool = TensorPool::create({PoolMemory::kHost, 0, 256, 1});
  ASSERT_TRUE(pool.has_value()) << pool.error().message;
  std::vector<std::int32_t> buffer = test::numbered_buffer(12);
  const StridedCase& transposed = test::strided_cases()[1];
  const Tensor source = test::import_view(buffer, transposed, std::make_shared<int>(0));
  auto copy = source.copy_to(**pool, nullptr);
  ASSERT_TRUE(copy.has_value()) << copy.error().message;
  EXPECT_EQ(values_of(*copy), test::gathered(buffer, transposed));
  EXPECT_NE(copy->flags() & DLPACK_FLAG_BITMASK_IS_COPIED, 0u);
  EXPECT_FALSE(copy->is_read_only());
  auto exhausted = source.copy_to(**pool, nullptr);  // the only block is taken
  ASSERT_FALSE(exhausted.has_value());
  EXPECT_EQ(exhausted.error().code, ErrorCode::kResourceExhausted);
  *copy = Tensor();
  std::vector<std::int32_t> large = test::numbered_buffer(80);  // 320 bytes, blocks of 256
  const Tensor too_large =
      test::import_view(large, StridedCase{"Large", {80}, {1}, 0}, std::make_shared<int>(0));
  auto refused = too_large.copy_to(**pool, nullptr);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, ErrorCode::kInvalidArgument);
}

#if DLPACK_MAJOR_VERSION > 1 || DLPACK_MINOR_VERSION >= 1
TEST(HostCopy, PackedSubByteElementsOnlyWhole) {
  test::CountingProducer producer;
  test::TensorSpec spec;
  spec.shape = {2, 8};
  spec.dtype = {kDLFloat4_e2m1fn, 4, 1};
  const Tensor compact = test::import_or_die(producer, spec);
  auto copy = compact.copy(nullptr);
  ASSERT_TRUE(copy.has_value()) << copy.error().message;
  EXPECT_EQ(copy->nbytes(), 8);
  spec.strides = std::vector<std::int64_t>{16, 1};  // padded rows: elements not on bytes
  const Tensor strided = test::import_or_die(producer, spec);
  auto refused = strided.copy(nullptr);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, ErrorCode::kNotSupported);
}
#endif

}  // namespace
}  // namespace holoscan
