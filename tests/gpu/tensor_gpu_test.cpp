// Tensor-level stream ordering of imported CUDA tensors, and DLPack export/import round trips
// that keep the device pointer, the device and the memory alive.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <holoscan/deferred_release.hpp>
#include <holoscan/tensor.hpp>
#include <memory>
#include <vector>

#include "gpu/gpu_test_fixture.hpp"
#include "gpu/kernels.hpp"

namespace holoscan::test {
namespace {

constexpr std::int64_t kElements = 1 << 15;
constexpr std::uint64_t kProducerDelayUs = 5'000;

class TensorGpuTest : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) {
      return;
    }
    HDL_ASSERT_CUDA(cudaGetDevice(&device_));
    producer_ = make_stream();
    consumer_ = make_stream();
    data_ = device_alloc_zeroed(kElements);
    ASSERT_NE(data_, nullptr);
    auto imported = make_tensor_from_dlpack_versioned(
        make_versioned_device_tensor(DeviceTensorSpec{data_, kElements, device_, &probe_, true}));
    ASSERT_TRUE(imported.has_value()) << imported.error().message;
    tensor_ = std::move(*imported);
    imported_ = true;
  }

  void TearDown() override {
    tensor_ = Tensor();
    GpuTest::TearDown();
    if (imported_) {
      EXPECT_EQ(probe_.calls(), 1) << "the producer's deleter must run exactly once";
    }
  }

  bool imported_ = false;
  int device_ = 0;
  cudaStream_t producer_ = nullptr;
  cudaStream_t consumer_ = nullptr;
  std::uint32_t* data_ = nullptr;
  DeleterProbe probe_;
  Tensor tensor_;
};

TEST_F(TensorGpuTest, ImportedDeviceTensorDescribesTheMemory) {
  EXPECT_EQ(tensor_.data(), data_);
  EXPECT_EQ(tensor_.device().device_type, kDLCUDA);
  EXPECT_EQ(tensor_.device().device_id, device_);
  EXPECT_EQ(tensor_.shape(), std::vector<std::int64_t>{kElements});
  EXPECT_EQ(tensor_.nbytes(), kElements * 4);
  EXPECT_TRUE(tensor_.is_contiguous());
}

TEST_F(TensorGpuTest, SynchronizeForConsumerOrdersAfterTheProducerStream) {
  constexpr std::uint32_t kSeed = 0x7E5;
  DeviceArray<CheckResult> result(1);
  // Before any readiness point the Tensor says so instead of succeeding silently.
  EXPECT_FALSE(tensor_.has_readiness_stream_contract());
  auto refused = tensor_.synchronize_for_consumer(consumer_);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, ErrorCode::kNotImplemented);

  auto* data = static_cast<std::uint32_t*>(tensor_.data());
  HDL_ASSERT_CUDA(launch_slow_fill(data, kElements, kSeed, kProducerDelayUs, producer_));
  ASSERT_TRUE(tensor_.set_readiness_stream(producer_));
  EXPECT_TRUE(tensor_.has_readiness_stream_contract());
  EXPECT_EQ(tensor_.memory_reference()->readiness_stream(), producer_);
  auto synced = tensor_.synchronize_for_consumer(consumer_);
  ASSERT_TRUE(synced.has_value()) << synced.error().message;
  HDL_ASSERT_CUDA(launch_check(data, kElements, kSeed, 0, result.get(), consumer_));
  ASSERT_TRUE(tensor_.set_deallocation_stream(consumer_));
  HDL_ASSERT_CUDA(cudaStreamSynchronize(consumer_));
  EXPECT_EQ(query_stream(producer_), cudaSuccess) << "the consumer did not wait for the producer";
  EXPECT_EQ(result.at(0).mismatches, 0u);
  EXPECT_EQ(result.at(0).checksum, expected_checksum(kSeed, kElements));
}

TEST_F(TensorGpuTest, DroppingTheLastHandleDefersTheDeleterPastConsumers) {
  DeviceArray<CheckResult> result(1);
  probe_.watch({consumer_});
  HDL_ASSERT_CUDA(launch_slow_fill(data_, kElements, 3, 0, producer_));
  ASSERT_TRUE(tensor_.set_readiness_stream(producer_));
  ASSERT_TRUE(tensor_.synchronize_for_consumer(consumer_).has_value());
  HDL_ASSERT_CUDA(launch_check(data_, kElements, 3, 100'000, result.get(), consumer_));
  ASSERT_TRUE(tensor_.set_deallocation_stream(consumer_));
  Tensor copy = tensor_;
  tensor_ = Tensor();
  EXPECT_EQ(probe_.calls(), 0) << "a copy still holds the memory";
  copy = Tensor();
  EXPECT_EQ(probe_.calls(), 0) << "the consumer still reads the memory";
  EXPECT_EQ(query_stream(consumer_), cudaErrorNotReady) << "dropping the handle blocked";
  flush_deferred_releases();
  ASSERT_EQ(probe_.calls(), 1);
  ASSERT_EQ(probe_.stream_status_at_delete().size(), 1u);
  EXPECT_EQ(probe_.stream_status_at_delete()[0], cudaSuccess);
  EXPECT_EQ(result.at(0).mismatches, 0u);
}

TEST_F(TensorGpuTest, VersionedExportRoundTripKeepsPointerDeviceAndMemory) {
  constexpr std::uint32_t kSeed = 0xE4;
  DeviceArray<CheckResult> result(1);
  HDL_ASSERT_CUDA(launch_slow_fill(data_, kElements, kSeed, 0, producer_));
  HDL_ASSERT_CUDA(cudaStreamSynchronize(producer_));

  auto exported = tensor_.export_dlpack_versioned();
  ASSERT_TRUE(exported.has_value()) << exported.error().message;
  const DLManagedTensorVersioned* managed = *exported;
  EXPECT_EQ(managed->version.major, 1u);
  EXPECT_EQ(static_cast<char*>(managed->dl_tensor.data) + managed->dl_tensor.byte_offset,
            static_cast<char*>(tensor_.data()));
  EXPECT_EQ(managed->dl_tensor.device.device_type, kDLCUDA);
  EXPECT_EQ(managed->dl_tensor.device.device_id, device_);
  ASSERT_EQ(managed->dl_tensor.ndim, 1);
  EXPECT_EQ(managed->dl_tensor.shape[0], kElements);

  auto reimported = make_tensor_from_dlpack_versioned(*exported);
  ASSERT_TRUE(reimported.has_value()) << reimported.error().message;
  Tensor back = std::move(*reimported);
  EXPECT_EQ(back.data(), static_cast<void*>(data_));
  EXPECT_EQ(back.device().device_type, kDLCUDA);
  EXPECT_EQ(back.device().device_id, device_);
  EXPECT_EQ(back.shape(), tensor_.shape());
  EXPECT_EQ(back.strides(), tensor_.strides());
  EXPECT_EQ(back.dtype().code, tensor_.dtype().code);
  EXPECT_EQ(back.dtype().bits, tensor_.dtype().bits);

  tensor_ = Tensor();
  EXPECT_EQ(probe_.calls(), 0) << "the round-tripped tensor must keep the memory alive";
  // Reading through the survivor: a premature cudaFree would show here and under memcheck.
  HDL_ASSERT_CUDA(launch_check(static_cast<const std::uint32_t*>(back.data()), kElements, kSeed, 0,
                               result.get(), consumer_));
  ASSERT_TRUE(back.set_deallocation_stream(consumer_));
  back = Tensor();
  flush_deferred_releases();
  EXPECT_EQ(probe_.calls(), 1);
  EXPECT_EQ(result.at(0).mismatches, 0u);
  EXPECT_EQ(result.at(0).checksum, expected_checksum(kSeed, kElements));
}

TEST_F(TensorGpuTest, LegacyExportRoundTripKeepsPointerAndDevice) {
  auto exported = tensor_.export_dlpack();
  ASSERT_TRUE(exported.has_value()) << exported.error().message;
  auto reimported = make_tensor_from_dlpack(*exported);
  ASSERT_TRUE(reimported.has_value()) << reimported.error().message;
  Tensor back = std::move(*reimported);
  EXPECT_EQ(back.data(), static_cast<void*>(data_));
  EXPECT_EQ(back.device().device_type, kDLCUDA);
  EXPECT_EQ(back.device().device_id, device_);
  EXPECT_EQ(back.shape(), tensor_.shape());
  tensor_ = Tensor();
  EXPECT_EQ(probe_.calls(), 0);
  back = Tensor();
  EXPECT_EQ(probe_.calls(), 1) << "no stream used the memory: the release is inline";
}

}  // namespace
}  // namespace holoscan::test
