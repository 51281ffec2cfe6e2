// Stress on the GPU: 4 producer streams share a device TensorPool for 10^5 tensors (stream-ordered
// and polling allocations alternate), each tensor read by a random fan-out of 1-3 of 4 consumer
// streams with slow kernels, and every 8th one exported over DLPack and imported back, so that
// DLPack owners and their deleters ride the release thread beside the pool. Every read must see
// what its producer wrote, and every deleter must run exactly once.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <holoscan/deferred_release.hpp>
#include <holoscan/tensor.hpp>
#include <holoscan/tensor_pool.hpp>
#include <iostream>
#include <random>
#include <vector>

#include "gpu/gpu_test_fixture.hpp"
#include "gpu/kernels.hpp"

namespace holoscan::test {
namespace {

constexpr std::int64_t kElements = 1024;
constexpr DLDataType kUInt32{kDLUInt, 32, 1};
constexpr int kProducers = 4;
constexpr int kConsumerStreams = 4;
constexpr std::size_t kBlocks = 16;

// 10^5 tensors (a few seconds on an H200); HOLOSCAN_DLPACK_STRESS_TENSORS lowers it under
// compute-sanitizer.
int stress_tensors() {
  const char* text = std::getenv("HOLOSCAN_DLPACK_STRESS_TENSORS");
  const int value = text != nullptr ? std::atoi(text) : 0;
  return value > 0 ? value : 100'000;
}

// A foreign producer's tensor over a pool export: its deleter counts itself, then deletes the
// export it wraps, so the test sees every deleter run exactly once.
struct CountedWrap {
  DLManagedTensorVersioned managed{};
  DLManagedTensorVersioned* inner = nullptr;
  std::atomic<int>* calls = nullptr;

  static DLManagedTensorVersioned* wrap(DLManagedTensorVersioned* inner, std::atomic<int>* calls) {
    auto* self = new CountedWrap();
    self->inner = inner;
    self->calls = calls;
    self->managed = *inner;
    self->managed.manager_ctx = self;
    self->managed.deleter = [](DLManagedTensorVersioned* managed) {
      auto* wrapped = static_cast<CountedWrap*>(managed->manager_ctx);
      wrapped->calls->fetch_add(1, std::memory_order_relaxed);
      wrapped->inner->deleter(wrapped->inner);
      delete wrapped;
    };
    return &self->managed;
  }
};

TEST_F(GpuTest, PooledTensorsWithRandomFanOutStayCorrectAndReleaseOnce) {
  const int tensors = stress_tensors();
  std::array<cudaStream_t, kProducers> producers{};
  std::array<cudaStream_t, kConsumerStreams> consumers{};
  for (auto& stream : producers) {
    stream = make_stream();
  }
  for (auto& stream : consumers) {
    stream = make_stream();
  }
  int device = 0;
  HDL_ASSERT_CUDA(cudaGetDevice(&device));
  auto created =
      TensorPool::create({PoolMemory::kDevice, device, kElements * sizeof(std::uint32_t), kBlocks});
  ASSERT_TRUE(created.has_value()) << created.error().message;
  std::shared_ptr<TensorPool> pool = *created;
  // One result slot per consumer stream: mismatches accumulate, so one copy back tells all.
  DeviceArray<CheckResult> results(kConsumerStreams);

  std::mt19937 random(20261130);
  int exports = 0;
  std::atomic<int> deleter_calls{0};
  std::uint64_t refused = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  for (int i = 0; i < tensors; ++i) {
    const cudaStream_t producer = producers[static_cast<std::size_t>(i % kProducers)];
    expected<Tensor> allocated = make_unexpected(ErrorCode::kResourceExhausted, "");
    while (!allocated) {
      // Alternate the two ways to reuse: the producer ordered after the readers, or polled.
      allocated = (i % 2 == 0) ? pool->allocate({kElements}, kUInt32, producer)
                               : pool->allocate({kElements}, kUInt32);
      if (!allocated) {
        ASSERT_EQ(allocated.error().code, ErrorCode::kResourceExhausted)
            << allocated.error().message;
        ++refused;
        ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "stalled at tensor " << i;
      }
    }
    Tensor tensor = std::move(*allocated);
    auto* data = static_cast<std::uint32_t*>(tensor.data());
    const auto seed = static_cast<std::uint32_t>(i);
    HDL_ASSERT_CUDA(launch_slow_fill(data, kElements, seed, random() % 4, producer));
    ASSERT_TRUE(tensor.set_readiness_stream(producer));

    Tensor reader = tensor;
    if (i % 8 == 0) {  // hand it on over DLPack, as to another framework and back
      DLManagedTensorVersioned* exported =
          CountedWrap::wrap(tensor.to_dlpack_versioned().value(), &deleter_calls);
      ++exports;
      auto imported = make_tensor_from_dlpack_versioned(exported);
      ASSERT_TRUE(imported.has_value()) << imported.error().message;
      ASSERT_TRUE(imported->is_read_only());
      // The import knows no readiness: order it by hand, as a consumer of a foreign tensor must.
      reader = std::move(*imported);
    }
    const int fan_out = 1 + static_cast<int>(random() % 3);
    const std::size_t first = random() % kConsumerStreams;
    for (int k = 0; k < fan_out; ++k) {
      const std::size_t c = (first + static_cast<std::size_t>(k)) % kConsumerStreams;
      auto synced = tensor.synchronize_for_consumer_stream(consumers[c]);
      ASSERT_TRUE(synced.has_value()) << synced.error().message;
      HDL_ASSERT_CUDA(launch_check(static_cast<const std::uint32_t*>(reader.data()), kElements,
                                   seed, random() % 8, results.get(c), consumers[c]));
      ASSERT_TRUE(reader.set_deallocation_stream(consumers[c]));
    }
  }  // each tensor (and its re-import) is dropped right after its readers were queued
  flush_deferred_releases();
  HDL_ASSERT_CUDA(cudaDeviceSynchronize());
  EXPECT_EQ(pending_deferred_releases(), 0u);

  unsigned mismatches = 0;
  for (const CheckResult& result : results.to_host()) {
    mismatches += result.mismatches;
  }
  EXPECT_EQ(mismatches, 0u);
  // Every import was dropped: its deleter ran exactly once, which gave the block its claim back
  // (a block still named would stay unavailable).
  EXPECT_EQ(deleter_calls.load(), exports);
  EXPECT_EQ(pool->available_blocks(), kBlocks);
  std::cout << "[   INFO   ] " << tensors << " tensors, " << exports << " DLPack round trips, "
            << refused << " allocations refused while readers ran, " << pool->reuse_count()
            << " reuses\n";
}

}  // namespace
}  // namespace holoscan::test
