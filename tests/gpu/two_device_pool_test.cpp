// A TensorPool of device 0 whose blocks are read on device 1 (peer access): a block must not come
// back, neither to a polling allocate() nor to a stream-ordered one, before device 1's consumer
// has finished, and the consumer must not read before device 0's producer is done. The consumer
// reads every element twice, the second time after spinning, so an early read or an early reuse
// shows up as mismatched data.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "gpu/gpu_test_fixture.hpp"
#include "holoscan/tensor_pool.hpp"

namespace holoscan::test {
namespace {

constexpr std::int64_t kElements = 1 << 18;
constexpr std::uint64_t kSlowUs = 20'000;
const DLDataType kUint32{kDLUInt, 32, 1};

class TwoDevicePoolTest : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) {
      return;
    }
    if (device_count() < 2) {
      GTEST_SKIP() << "needs two CUDA devices, found " << device_count();
    }
    int can_access = 0;
    HDL_ASSERT_CUDA(cudaDeviceCanAccessPeer(&can_access, 1, 0));
    if (can_access == 0) {
      GTEST_SKIP() << "device 1 cannot access device 0's memory (no peer access)";
    }
    HDL_ASSERT_CUDA(cudaSetDevice(1));
    const cudaError_t enabled = cudaDeviceEnablePeerAccess(0, 0);
    if (enabled == cudaErrorPeerAccessAlreadyEnabled) {
      (void)cudaGetLastError();
    } else {
      HDL_ASSERT_CUDA(enabled);
    }
    HDL_ASSERT_CUDA(cudaSetDevice(0));
    auto pool = TensorPool::create(
        {PoolMemory::kDevice, 0, kElements * sizeof(std::uint32_t), 1});
    ASSERT_TRUE(pool.has_value()) << pool.error().message;
    pool_ = *pool;
    producer_ = make_stream(0);
    consumer_ = make_stream(1);
  }

  // Writes `seed` on device 0 after `fill_delay_us`, then checks it on device 1 (reading twice,
  // kSlowUs apart), and drops the tensor with device 1's consumer still running.
  void produce_and_consume(Tensor tensor, std::uint32_t seed, std::uint64_t fill_delay_us,
                           CheckResult* result) {
    auto* data = static_cast<std::uint32_t*>(tensor.data());
    HDL_ASSERT_CUDA(cudaSetDevice(0));
    HDL_ASSERT_CUDA(launch_slow_fill(data, kElements, seed, fill_delay_us, producer_));
    ASSERT_TRUE(tensor.set_readiness_stream(producer_));
    HDL_ASSERT_CUDA(cudaSetDevice(1));
    ASSERT_TRUE(tensor.synchronize_for_consumer_stream(consumer_).has_value());
    HDL_ASSERT_CUDA(launch_check(data, kElements, seed, kSlowUs, result, consumer_));
    ASSERT_TRUE(tensor.set_deallocation_stream(consumer_));
    HDL_ASSERT_CUDA(cudaSetDevice(0));
  }

  std::shared_ptr<TensorPool> pool_;
  cudaStream_t producer_ = nullptr;
  cudaStream_t consumer_ = nullptr;
};

TEST_F(TwoDevicePoolTest, PollingAllocateWaitsForTheOtherDevicesConsumer) {
  HDL_ASSERT_CUDA(cudaSetDevice(1));
  DeviceArray<CheckResult> result(1);
  HDL_ASSERT_CUDA(cudaSetDevice(0));
  auto first = pool_->allocate({kElements}, kUint32);
  ASSERT_TRUE(first.has_value()) << first.error().message;
  produce_and_consume(std::move(*first), 1, kSlowUs, result.get());

  // Device 1 still spins in its second read: the block is not free, at once or while it runs.
  EXPECT_EQ(pool_->available_blocks(), 0u);
  auto refused = pool_->allocate({kElements}, kUint32);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, ErrorCode::kResourceExhausted);

  HDL_ASSERT_CUDA(cudaStreamSynchronize(consumer_));
  EXPECT_EQ(pool_->available_blocks(), 1u);
  auto second = pool_->allocate({kElements}, kUint32);
  ASSERT_TRUE(second.has_value()) << second.error().message;
  EXPECT_EQ(result.at(0).mismatches, 0u);
  EXPECT_EQ(result.at(0).checksum, expected_checksum(1, kElements));
}

TEST_F(TwoDevicePoolTest, StreamOrderedReuseWaitsForTheOtherDevicesConsumer) {
  HDL_ASSERT_CUDA(cudaSetDevice(1));
  DeviceArray<CheckResult> results(2);
  HDL_ASSERT_CUDA(cudaSetDevice(0));
  for (std::uint32_t round = 0; round < 2; ++round) {
    // The second round takes the block while device 1 still reads the first round's data and
    // writes it at once: unless the producer stream waits for device 1's deallocation point,
    // that write lands between the consumer's two reads.
    auto tensor = pool_->allocate({kElements}, kUint32, producer_);
    ASSERT_TRUE(tensor.has_value()) << "round " << round << ": " << tensor.error().message;
    produce_and_consume(std::move(*tensor), round + 1, round == 0 ? kSlowUs : 0,
                        results.get(round));
  }
  HDL_ASSERT_CUDA(cudaStreamSynchronize(consumer_));
  EXPECT_EQ(pool_->reuse_count(), 1u);
  for (std::uint32_t round = 0; round < 2; ++round) {
    EXPECT_EQ(results.at(round).mismatches, 0u) << "round " << round;
    EXPECT_EQ(results.at(round).checksum, expected_checksum(round + 1, kElements))
        << "round " << round;
  }
}

}  // namespace
}  // namespace holoscan::test
