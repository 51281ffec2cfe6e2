// Deallocation ordering (consumer streams -> the producer's deleter): fan-out, deferral without
// blocking, release without a further call, moving a stream's point forward, the release thread.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <holoscan/deferred_release.hpp>
#include <holoscan/dlpack.hpp>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gpu/gpu_test_fixture.hpp"
#include "gpu/kernels.hpp"

namespace holoscan::test {
namespace {

constexpr std::int64_t kElements = 1 << 14;
constexpr std::uint32_t kSeed = 0xDEA110C;
// How long the library may take to run a deferred deleter on its own once the GPU is done.
constexpr auto kReleaseDeadline = std::chrono::seconds(5);

class DeallocationTest : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) {
      return;
    }
    HDL_ASSERT_CUDA(cudaGetDevice(&device_));
    flush_deferred_releases();  // pending_deferred_releases() counts are exact from here
  }

  // A buffer over freshly produced device memory; its deleter reports to `probe` and cudaFrees.
  std::unique_ptr<DLManagedMemoryBufferVersioned> make_buffer(DeleterProbe& probe) {
    std::uint32_t* data = device_alloc_zeroed(kElements);
    EXPECT_NE(data, nullptr);
    EXPECT_EQ(launch_slow_fill(data, kElements, kSeed, 0, nullptr), 0);
    EXPECT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
    return std::make_unique<DLManagedMemoryBufferVersioned>(
        make_versioned_device_tensor(DeviceTensorSpec{data, kElements, device_, &probe, true}));
  }

  static const std::uint32_t* data_of(const DLManagedMemoryBufferVersioned& buffer) {
    return static_cast<const std::uint32_t*>(buffer.managed_tensor()->dl_tensor.data);
  }

  static void expect_all_done_at_delete(const DeleterProbe& probe, std::size_t streams) {
    const std::vector<cudaError_t> seen = probe.stream_status_at_delete();
    ASSERT_EQ(seen.size(), streams);
    for (std::size_t i = 0; i < seen.size(); ++i) {
      EXPECT_EQ(seen[i], cudaSuccess) << "consumer stream " << i << " still ran (status "
                                      << cudaGetErrorName(seen[i]) << ") when the deleter ran";
    }
  }

  int device_ = 0;
};

// Consumers that read the memory at the end of a long spin; each stream's spin ends at a
// different time, and the last stream given finishes first, so "last writer wins" is caught.
std::vector<std::uint64_t> consumer_delays_us(int streams) {
  if (streams == 2) {
    return {200'000, 50'000};
  }
  return {150'000, 250'000, 50'000};
}

class FanOutTest : public DeallocationTest, public ::testing::WithParamInterface<int> {};

TEST_P(FanOutTest, DeleterWaitsForEveryConsumerStreamWithoutBlocking) {
  const int consumers = GetParam();
  const std::vector<std::uint64_t> delays = consumer_delays_us(consumers);
  DeleterProbe probe;
  DeviceArray<CheckResult> results(static_cast<std::size_t>(consumers));
  std::vector<cudaStream_t> streams;
  for (int i = 0; i < consumers; ++i) {
    streams.push_back(make_stream());
  }
  probe.watch(streams);
  auto buffer = make_buffer(probe);
  ASSERT_NE(buffer, nullptr);

  for (int i = 0; i < consumers; ++i) {
    const auto slot = static_cast<std::size_t>(i);
    HDL_ASSERT_CUDA(launch_check(data_of(*buffer), kElements, kSeed, delays[slot],
                                 results.get(slot), streams[slot]));
    ASSERT_TRUE(buffer->set_deallocation_stream(streams[slot]));
  }
  EXPECT_EQ(buffer->deallocation_point_count(), static_cast<std::size_t>(consumers));

  buffer.reset();
  // Right after the destructor: nothing released, nothing waited for.
  EXPECT_EQ(probe.calls(), 0) << "the deleter ran while consumers still read the memory";
  for (int i = 0; i < consumers; ++i) {
    EXPECT_EQ(query_stream(streams[static_cast<std::size_t>(i)]), cudaErrorNotReady)
        << "the destructor blocked until stream " << i << " finished";
  }
  EXPECT_EQ(pending_deferred_releases(), 1u);

  flush_deferred_releases();
  EXPECT_EQ(probe.calls(), 1);
  EXPECT_EQ(pending_deferred_releases(), 0u);
  for (cudaStream_t stream : streams) {
    EXPECT_EQ(query_stream(stream), cudaSuccess);
  }
  expect_all_done_at_delete(probe, streams.size());
  for (int i = 0; i < consumers; ++i) {
    const CheckResult r = results.at(static_cast<std::size_t>(i));
    EXPECT_EQ(r.mismatches, 0u) << "consumer " << i;
    EXPECT_EQ(r.checksum, expected_checksum(kSeed, kElements)) << "consumer " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Consumers, FanOutTest, ::testing::Values(2, 3),
                         [](const ::testing::TestParamInfo<int>& param_info) {
                           return std::to_string(param_info.param) + "Streams";
                         });

TEST_F(DeallocationTest, DeferredDeleterRunsWithoutAnyFurtherCall) {
  DeleterProbe probe;
  DeviceArray<CheckResult> results(2);
  const std::vector<cudaStream_t> streams = {make_stream(), make_stream()};
  probe.watch(streams);
  auto buffer = make_buffer(probe);
  ASSERT_NE(buffer, nullptr);
  HDL_ASSERT_CUDA(
      launch_check(data_of(*buffer), kElements, kSeed, 100'000, results.get(0), streams[0]));
  HDL_ASSERT_CUDA(
      launch_check(data_of(*buffer), kElements, kSeed, 30'000, results.get(1), streams[1]));
  ASSERT_TRUE(buffer->set_deallocation_stream(streams[0]));
  ASSERT_TRUE(buffer->set_deallocation_stream(streams[1]));
  buffer.reset();
  EXPECT_EQ(probe.calls(), 0);

  // Poll the counter only: no flush, no stream synchronization, no other library call.
  const auto deadline = std::chrono::steady_clock::now() + kReleaseDeadline;
  while (probe.calls() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(probe.calls(), 1) << "the deferred deleter did not run by itself within 5 s";
  expect_all_done_at_delete(probe, streams.size());
  // The queue's count drops just after the deleter returns, so it is polled too.
  while (pending_deferred_releases() != 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(pending_deferred_releases(), 0u);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(results.at(i).checksum, expected_checksum(kSeed, kElements));
  }
}

// A second point on the same stream replaces the first: one point, and the deleter waits for
// the later work (a stale first point would let it run during the spin).
TEST_F(DeallocationTest, SameStreamTwiceMovesItsPointForward) {
  DeleterProbe probe;
  DeviceArray<CheckResult> results(2);
  const cudaStream_t stream = make_stream();
  probe.watch({stream});
  auto buffer = make_buffer(probe);
  ASSERT_NE(buffer, nullptr);
  HDL_ASSERT_CUDA(launch_check(data_of(*buffer), kElements, kSeed, 0, results.get(0), stream));
  ASSERT_TRUE(buffer->set_deallocation_stream(stream));
  HDL_ASSERT_CUDA(launch_spin(150'000, stream));
  HDL_ASSERT_CUDA(launch_check(data_of(*buffer), kElements, kSeed, 0, results.get(1), stream));
  ASSERT_TRUE(buffer->set_deallocation_stream(stream));
  EXPECT_EQ(buffer->deallocation_point_count(), 1u);

  buffer.reset();
  EXPECT_EQ(probe.calls(), 0);
  EXPECT_EQ(query_stream(stream), cudaErrorNotReady);
  flush_deferred_releases();
  EXPECT_EQ(probe.calls(), 1);
  expect_all_done_at_delete(probe, 1);
  EXPECT_EQ(results.at(1).mismatches, 0u);
  EXPECT_EQ(results.at(1).checksum, expected_checksum(kSeed, kElements));
}

// The destructor never queries (a query costs more than the record): even completed points are
// settled by the release thread, which runs the deleter without any further call.
TEST_F(DeallocationTest, CompletedPointsReleaseOnTheReleaseThread) {
  DeleterProbe probe;
  DeviceArray<CheckResult> result(1);
  const cudaStream_t stream = make_stream();
  probe.watch({stream});
  auto buffer = make_buffer(probe);
  ASSERT_NE(buffer, nullptr);
  HDL_ASSERT_CUDA(launch_check(data_of(*buffer), kElements, kSeed, 0, result.get(), stream));
  ASSERT_TRUE(buffer->set_deallocation_stream(stream));
  HDL_ASSERT_CUDA(cudaStreamSynchronize(stream));

  buffer.reset();
  flush_deferred_releases();
  EXPECT_EQ(probe.calls(), 1) << "all points had completed: the deleter should have run";
  EXPECT_EQ(pending_deferred_releases(), 0u);
  expect_all_done_at_delete(probe, 1);
}

TEST_F(DeallocationTest, NoPointsReleaseInlineInTheDestructor) {
  DeleterProbe probe;
  auto buffer = make_buffer(probe);
  ASSERT_NE(buffer, nullptr);
  EXPECT_EQ(buffer->deallocation_point_count(), 0u);
  buffer.reset();
  EXPECT_EQ(probe.calls(), 1);
  EXPECT_EQ(pending_deferred_releases(), 0u);
}

TEST_F(DeallocationTest, PendingDeferredReleasesCountsTheQueue) {
  constexpr int kBuffers = 3;
  ASSERT_EQ(pending_deferred_releases(), 0u);
  const cudaStream_t stream = make_stream();
  DeleterProbe probes[kBuffers];
  std::unique_ptr<DLManagedMemoryBufferVersioned> buffers[kBuffers];
  for (auto& probe : probes) {
    probe.watch({stream});
  }
  for (int i = 0; i < kBuffers; ++i) {
    buffers[i] = make_buffer(probes[i]);
    ASSERT_NE(buffers[i], nullptr);
  }
  HDL_ASSERT_CUDA(launch_spin(300'000, stream));  // every point below stays pending meanwhile
  for (int i = 0; i < kBuffers; ++i) {
    ASSERT_TRUE(buffers[i]->set_deallocation_stream(stream));
  }
  for (int i = 0; i < kBuffers; ++i) {
    buffers[i].reset();
    EXPECT_EQ(pending_deferred_releases(), static_cast<std::size_t>(i + 1));
  }
  ASSERT_EQ(query_stream(stream), cudaErrorNotReady) << "the spin ended early; counts unproven";
  flush_deferred_releases();
  EXPECT_EQ(pending_deferred_releases(), 0u);
  for (int i = 0; i < kBuffers; ++i) {
    EXPECT_EQ(probes[i].calls(), 1) << "buffer " << i;
    expect_all_done_at_delete(probes[i], 1);
  }
}

}  // namespace
}  // namespace holoscan::test
