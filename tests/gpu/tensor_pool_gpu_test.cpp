// The device TensorPool under load: a block is never reused while a consumer stream still reads
// it, exhaustion is reported at once, and blocks come back once their streams finish.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <holoscan/tensor.hpp>
#include <holoscan/tensor_pool.hpp>
#include <iostream>
#include <memory>
#include <vector>

#include "gpu/gpu_test_fixture.hpp"
#include "gpu/kernels.hpp"

namespace holoscan::test {
namespace {

constexpr std::int64_t kElements = 1 << 13;
constexpr DLDataType kUInt32{kDLUInt, 32, 1};
constexpr int kConsumers = 3;
// A short producer delay, so that a consumer which skipped the readiness wait reads old data.
constexpr std::uint64_t kProducerDelayUs = 5;
// Consumers re-read after this spin: a block reused meanwhile has been overwritten by then.
constexpr std::uint64_t kConsumerDelayUs = 100;
constexpr auto kAllocateDeadline = std::chrono::seconds(5);

// About 0.3 s on an H200; HOLOSCAN_DLPACK_POOL_ITERATIONS lowers it under compute-sanitizer.
int stress_iterations() {
  const char* text = std::getenv("HOLOSCAN_DLPACK_POOL_ITERATIONS");
  const int value = text != nullptr ? std::atoi(text) : 0;
  return value > 0 ? value : 5000;
}

class TensorPoolGpuTest : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) {
      return;
    }
    HDL_ASSERT_CUDA(cudaGetDevice(&device_));
    producer_ = make_stream();
    for (auto& consumer : consumers_) {
      consumer = make_stream();
    }
  }

  std::shared_ptr<TensorPool> make_pool(std::size_t blocks) {
    TensorPoolConfig config;
    config.memory = PoolMemory::kDevice;
    config.device = device_;
    config.block_bytes = kElements * sizeof(std::uint32_t);
    config.block_count = blocks;
    auto pool = TensorPool::create(config);
    EXPECT_TRUE(pool.has_value()) << pool.error().message;
    return pool ? *pool : nullptr;
  }

  int device_ = 0;
  cudaStream_t producer_ = nullptr;
  cudaStream_t consumers_[kConsumers] = {};
};

TEST_F(TensorPoolGpuTest, ReuseNeverOverwritesDataThatConsumersStillRead) {
  constexpr std::size_t kBlocks = 4;
  const int iterations = stress_iterations();
  auto pool = make_pool(kBlocks);
  ASSERT_NE(pool, nullptr);
  DeviceArray<CheckResult> results(static_cast<std::size_t>(iterations) * kConsumers);
  std::uint64_t exhausted_polls = 0;

  for (int iteration = 0; iteration < iterations; ++iteration) {
    Tensor tensor;
    const auto deadline = std::chrono::steady_clock::now() + kAllocateDeadline;
    for (;;) {
      auto allocated = pool->allocate({kElements}, kUInt32);
      if (allocated) {
        tensor = std::move(*allocated);
        break;
      }
      ASSERT_EQ(allocated.error().code, ErrorCode::kResourceExhausted) << allocated.error().message;
      ++exhausted_polls;
      ASSERT_LT(std::chrono::steady_clock::now(), deadline)
          << "no block came back within 5 s at iteration " << iteration;
    }
    auto* data = static_cast<std::uint32_t*>(tensor.data());
    const auto seed = static_cast<std::uint32_t>(iteration);
    HDL_ASSERT_CUDA(launch_slow_fill(data, kElements, seed, kProducerDelayUs, producer_));
    ASSERT_TRUE(tensor.set_readiness_stream(producer_));
    for (int c = 0; c < kConsumers; ++c) {
      auto synced = tensor.synchronize_for_consumer_stream(consumers_[c]);
      ASSERT_TRUE(synced.has_value()) << synced.error().message;
      const auto slot = static_cast<std::size_t>(iteration) * kConsumers + c;
      HDL_ASSERT_CUDA(
          launch_check(data, kElements, seed, kConsumerDelayUs, results.get(slot), consumers_[c]));
      ASSERT_TRUE(tensor.set_deallocation_stream(consumers_[c]));
    }
  }  // each iteration drops its Tensor right after queuing the consumers
  HDL_ASSERT_CUDA(cudaDeviceSynchronize());

  const std::vector<CheckResult> seen = results.to_host();
  int bad_slots = 0;
  for (int iteration = 0; iteration < iterations; ++iteration) {
    const unsigned long long expected =
        expected_checksum(static_cast<std::uint32_t>(iteration), kElements);
    for (int c = 0; c < kConsumers; ++c) {
      const CheckResult& r = seen[static_cast<std::size_t>(iteration) * kConsumers + c];
      if (r.mismatches == 0 && r.checksum == expected) {
        continue;
      }
      if (++bad_slots <= 5) {
        ADD_FAILURE() << "iteration " << iteration << " consumer " << c << ": " << r.mismatches
                      << " mismatches, checksum " << r.checksum << " (expected " << expected << ")";
      }
    }
  }
  EXPECT_EQ(bad_slots, 0);
  EXPECT_GE(pool->reuse_count(), static_cast<std::uint64_t>(iterations) - kBlocks);
  // Only a host that outran the consumers could have reused a block early; on a GPU that runs
  // the streams concurrently it must have. (compute-sanitizer serializes and slows the host.)
  if (GpuTest::streams_run_concurrently()) {
    EXPECT_GT(exhausted_polls, 0u) << "the pool was never exhausted: early reuse was not possible";
  }
  std::cout << "[   INFO   ] " << iterations << " iterations, " << exhausted_polls
            << " allocations refused while consumers ran\n";
}

TEST_F(TensorPoolGpuTest, ExhaustionIsImmediateAndBlocksReturnWhenConsumersFinish) {
  constexpr std::size_t kBlocks = 3;
  // Per block and consumer. Each stream runs its kernels in turn, so block b's point on a stream
  // completes after that stream's kernels 0..b: consumer 0 passes every point (at 50, 100 and
  // 150 ms) long before consumer 1 passes its first (300 ms).
  constexpr std::uint64_t kDelayUs[kBlocks][2] = {
      {50'000, 300'000}, {50'000, 10'000}, {50'000, 10'000}};
  auto pool = make_pool(kBlocks);
  ASSERT_NE(pool, nullptr);
  DeviceArray<CheckResult> results(2 * kBlocks);
  EXPECT_EQ(pool->available_blocks(), kBlocks);

  for (std::size_t b = 0; b < kBlocks; ++b) {
    auto allocated = pool->allocate({kElements}, kUInt32);
    ASSERT_TRUE(allocated.has_value()) << allocated.error().message;
    Tensor tensor = std::move(*allocated);
    auto* data = static_cast<std::uint32_t*>(tensor.data());
    const auto seed = static_cast<std::uint32_t>(100 + b);
    HDL_ASSERT_CUDA(launch_slow_fill(data, kElements, seed, 0, producer_));
    ASSERT_TRUE(tensor.set_readiness_stream(producer_));
    for (int c = 0; c < 2; ++c) {
      ASSERT_TRUE(tensor.synchronize_for_consumer_stream(consumers_[c]).has_value());
      HDL_ASSERT_CUDA(launch_check(data, kElements, seed, kDelayUs[b][c], results.get(2 * b + c),
                                   consumers_[c]));
      ASSERT_TRUE(tensor.set_deallocation_stream(consumers_[c]));
    }
  }

  auto refused = pool->allocate({kElements}, kUInt32);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, ErrorCode::kResourceExhausted) << refused.error().message;
  EXPECT_EQ(query_stream(consumers_[0]), cudaErrorNotReady) << "allocate waited for the GPU";
  EXPECT_EQ(pool->available_blocks(), 0u);

  HDL_ASSERT_CUDA(cudaStreamSynchronize(consumers_[0]));
  // Consumer 1 outlives consumer 0 only where streams overlap (not under compute-sanitizer).
  if (GpuTest::streams_run_concurrently()) {
    ASSERT_EQ(query_stream(consumers_[1]), cudaErrorNotReady) << "consumer 1 ended early";
    EXPECT_EQ(pool->available_blocks(), 0u) << "a block came back while consumer 1 still read it";
  }
  HDL_ASSERT_CUDA(cudaStreamSynchronize(consumers_[1]));
  EXPECT_EQ(pool->available_blocks(), kBlocks);
  auto again = pool->allocate({kElements}, kUInt32);
  EXPECT_TRUE(again.has_value()) << again.error().message;

  for (std::size_t slot = 0; slot < 2 * kBlocks; ++slot) {
    const CheckResult r = results.at(slot);
    EXPECT_EQ(r.mismatches, 0u) << "slot " << slot;
    EXPECT_EQ(r.checksum, expected_checksum(static_cast<std::uint32_t>(100 + slot / 2), kElements))
        << "slot " << slot;
  }
}

TEST_F(TensorPoolGpuTest, HandlesAndExportsHoldTheirBlock) {
  auto pool = make_pool(2);
  ASSERT_NE(pool, nullptr);
  auto allocated = pool->allocate({kElements}, kUInt32);
  ASSERT_TRUE(allocated.has_value()) << allocated.error().message;
  Tensor tensor = std::move(*allocated);
  EXPECT_EQ(tensor.device().device_type, kDLCUDA);
  EXPECT_EQ(tensor.device().device_id, device_);
  cudaPointerAttributes attributes{};
  HDL_ASSERT_CUDA(cudaPointerGetAttributes(&attributes, tensor.data()));
  EXPECT_EQ(attributes.type, cudaMemoryTypeDevice);
  EXPECT_EQ(attributes.device, device_);

  auto exported = tensor.to_dlpack_versioned();
  ASSERT_TRUE(exported.has_value()) << exported.error().message;
  Tensor copy = tensor;
  tensor = Tensor();
  EXPECT_EQ(pool->available_blocks(), 1u) << "a copy still names the block";
  copy = Tensor();
  EXPECT_EQ(pool->available_blocks(), 1u) << "the export still names the block";
  (*exported)->deleter(*exported);
  EXPECT_EQ(pool->available_blocks(), 2u);
}

}  // namespace
}  // namespace holoscan::test
