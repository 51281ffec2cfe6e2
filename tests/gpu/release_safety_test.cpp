// Releases that must not come early: flush ordering across releases queued during it, owners
// destroyed while the thread captures a graph, pool blocks dropped while the producer still
// writes them (also after its readiness moved to another stream), and readiness that alternates
// between devices without consuming new events.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <future>
#include <holoscan/deferred_release.hpp>
#include <holoscan/dlpack.hpp>
#include <holoscan/event_pool.hpp>
#include <holoscan/tensor_pool.hpp>
#include <memory>
#include <thread>
#include <vector>

#include "gpu/gpu_test_fixture.hpp"
#include "gpu/kernels.hpp"

namespace holoscan::test {
namespace {

constexpr std::int64_t kElements = 1 << 12;

class ReleaseSafetyTest : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) {
      return;
    }
    HDL_ASSERT_CUDA(cudaGetDevice(&device_));
  }

  // An owner of fresh device memory whose deleter reports to `probe`.
  std::unique_ptr<DLManagedMemoryBufferVersioned> make_buffer(DeleterProbe& probe) {
    std::uint32_t* data = device_alloc_zeroed(kElements);
    EXPECT_NE(data, nullptr);
    return std::make_unique<DLManagedMemoryBufferVersioned>(
        make_versioned_device_tensor(DeviceTensorSpec{data, kElements, device_, &probe, true}));
  }

  int device_ = 0;
};

// flush() promises every release queued before it; a shorter release queued while it waits must
// not let it return early.
TEST_F(ReleaseSafetyTest, FlushWaitsForEveryOlderReleaseWhateverFinishesFirst) {
  DeleterProbe slow_probe;
  DeleterProbe quick_probe;
  cudaStream_t slow = make_stream();
  cudaStream_t quick = make_stream();
  auto slow_buffer = make_buffer(slow_probe);
  auto quick_buffer = make_buffer(quick_probe);
  HDL_ASSERT_CUDA(launch_spin(300'000, slow));
  ASSERT_TRUE(slow_buffer->set_deallocation_stream(slow));
  slow_buffer.reset();
  ASSERT_EQ(slow_probe.calls(), 0);

  auto flushed = std::async(std::launch::async, [] { flush_deferred_releases(); });
  HDL_ASSERT_CUDA(launch_spin(5'000, quick));
  ASSERT_TRUE(quick_buffer->set_deallocation_stream(quick));
  quick_buffer.reset();
  flushed.get();
  EXPECT_EQ(slow_probe.calls(), 1) << "flush returned before a release queued earlier ran";
  flush_deferred_releases();
  EXPECT_EQ(quick_probe.calls(), 1);
}

// Destroying an owner while this thread captures a graph must neither run the deleter early
// (the event query is refused during capture) nor break the capture.
TEST_F(ReleaseSafetyTest, DestructionDuringCaptureDefersAndKeepsTheCapture) {
  DeleterProbe probe;
  cudaStream_t consumer = make_stream();
  cudaStream_t capturing = make_stream();
  probe.watch({consumer});
  auto buffer = make_buffer(probe);
  HDL_ASSERT_CUDA(launch_spin(100'000, consumer));
  ASSERT_TRUE(buffer->set_deallocation_stream(consumer));

  HDL_ASSERT_CUDA(cudaStreamBeginCapture(capturing, cudaStreamCaptureModeGlobal));
  HDL_ASSERT_CUDA(launch_spin(1, capturing));
  buffer.reset();
  EXPECT_EQ(probe.calls(), 0) << "the deleter ran while the consumer still used the memory";
  cudaGraph_t graph = nullptr;
  HDL_EXPECT_CUDA(cudaStreamEndCapture(capturing, &graph));
  if (graph != nullptr) {
    HDL_EXPECT_CUDA(cudaGraphDestroy(graph));
  }
  flush_deferred_releases();
  EXPECT_EQ(probe.calls(), 1);
  const std::vector<cudaError_t> seen = probe.stream_status_at_delete();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0], cudaSuccess) << "the consumer still ran when the deleter did";
}

// A one-block device pool whose tensor is written slowly on `writer`, which records readiness,
// then (when `moved_to` is given) moves readiness there, and is dropped: the block must not come
// back while `writer` still writes it, and must come back once it is done.
void expect_block_waits_for_the_writer(int device, cudaStream_t writer, cudaStream_t moved_to) {
  TensorPoolConfig config;
  config.memory = PoolMemory::kDevice;
  config.device = device;
  config.block_bytes = kElements * sizeof(std::uint32_t);
  config.block_count = 1;
  auto pool = TensorPool::create(config);
  ASSERT_TRUE(pool.has_value()) << pool.error().message;
  {
    auto tensor = (*pool)->allocate({kElements}, DLDataType{kDLUInt, 32, 1});
    ASSERT_TRUE(tensor.has_value()) << tensor.error().message;
    HDL_ASSERT_CUDA(launch_slow_fill(static_cast<std::uint32_t*>(tensor->data()), kElements, 7,
                                     200'000, writer));
    ASSERT_TRUE(tensor->set_readiness_stream(writer));
    if (moved_to != nullptr) {
      ASSERT_TRUE(tensor->set_readiness_stream(moved_to));
    }
  }
  auto refused = (*pool)->allocate({kElements}, DLDataType{kDLUInt, 32, 1});
  ASSERT_FALSE(refused.has_value()) << "the block came back while the producer still wrote it";
  EXPECT_EQ(refused.error().code, ErrorCode::kResourceExhausted);
  EXPECT_EQ(query_stream(writer), cudaErrorNotReady);
  HDL_ASSERT_CUDA(cudaStreamSynchronize(writer));
  auto again = (*pool)->allocate({kElements}, DLDataType{kDLUInt, 32, 1});
  EXPECT_TRUE(again.has_value()) << again.error().message;
}

// A producer that drops a pooled tensor before anyone consumed it is still writing the block:
// the block must wait for the producer's readiness point as well.
TEST_F(ReleaseSafetyTest, PoolBlockWaitsForTheProducersWork) {
  expect_block_waits_for_the_writer(device_, make_stream(), nullptr);
}

// Readiness moved to another (idle) stream of the same device, where its one event is recorded
// next: the pool's reuse of the block must still wait for the first stream's writes.
TEST_F(ReleaseSafetyTest, PoolBlockWaitsForTheReadinessLeftOnAnotherStream) {
  expect_block_waits_for_the_writer(device_, make_stream(), make_stream());
}

// The same move seen by a consumer: its one wait orders it after both streams' writes.
TEST_F(ReleaseSafetyTest, ConsumerWaitsForTheReadinessLeftOnAnotherStream) {
  constexpr std::uint32_t kSeed = 11;
  DeleterProbe probe;
  std::uint32_t* data = device_alloc_zeroed(kElements);
  ASSERT_NE(data, nullptr);
  auto buffer = std::make_unique<DLManagedMemoryBufferVersioned>(
      make_versioned_device_tensor(DeviceTensorSpec{data, kElements, device_, &probe, true}));
  cudaStream_t first = make_stream();
  cudaStream_t second = make_stream();
  cudaStream_t consumer = make_stream();
  DeviceArray<CheckResult> result(1);
  HDL_ASSERT_CUDA(launch_slow_fill(data, kElements, kSeed, 200'000, first));
  ASSERT_TRUE(buffer->set_readiness_stream(first));
  ASSERT_TRUE(buffer->set_readiness_stream(second));  // an idle stream
  ASSERT_TRUE(buffer->synchronize_for_consumer(consumer).has_value());
  HDL_ASSERT_CUDA(launch_check(data, kElements, kSeed, 0, result.get(), consumer));
  ASSERT_TRUE(buffer->set_deallocation_stream(consumer));
  buffer.reset();
  HDL_ASSERT_CUDA(cudaStreamSynchronize(consumer));
  EXPECT_EQ(result.at(0).mismatches, 0u) << "the consumer read before the first stream's writes";
  EXPECT_EQ(result.at(0).checksum, expected_checksum(kSeed, kElements));
  flush_deferred_releases();  // the probe must outlive the deleter
  EXPECT_EQ(probe.calls(), 1);
}

// A burst of owners whose deallocation points wait on a busy stream fills the event pool; a trim
// meanwhile destroys only free events, never one a pending release still holds, and a trim that
// runs again and again while the release thread gives the events back loses none and frees none
// twice: every deleter runs once, after the GPU work, and the pool ends with what it had.
TEST_F(ReleaseSafetyTest, TrimDuringABurstDestroysOnlyFreeEventsAndRacesTheGiveBacks) {
  constexpr int kOwners = 256;
  flush_deferred_releases();
  (void)trim_stream_events(device_);
  const std::size_t baseline = created_stream_events(device_);
  ASSERT_TRUE(reserve_stream_events(device_, baseline + kOwners + 64).has_value());

  std::vector<std::unique_ptr<DeleterProbe>> probes;
  std::vector<std::unique_ptr<DLManagedMemoryBufferVersioned>> buffers;
  for (int i = 0; i < kOwners; ++i) {  // allocated before the spin: cudaMalloc synchronizes
    probes.push_back(std::make_unique<DeleterProbe>());
    buffers.push_back(make_buffer(*probes.back()));
  }
  cudaStream_t busy = make_stream();
  for (auto& probe : probes) {
    probe->watch({busy});
  }
  HDL_ASSERT_CUDA(launch_spin(300'000, busy));
  for (auto& buffer : buffers) {
    ASSERT_TRUE(buffer->set_deallocation_stream(busy));
    buffer.reset();
  }
  const std::size_t trimmed = trim_stream_events(device_);
  ASSERT_EQ(query_stream(busy), cudaErrorNotReady) << "the spin ended before the trim: no proof";
  EXPECT_GE(trimmed, 64u) << "the reserved free events were kept";
  EXPECT_GE(created_stream_events(device_), baseline + kOwners)
      << "the trim destroyed events that pending releases still hold";
  for (const auto& probe : probes) {
    EXPECT_EQ(probe->calls(), 0) << "a deleter ran while the stream still used its memory";
  }

  std::atomic<bool> drained{false};
  std::thread trimmer([&] {
    while (!drained.load(std::memory_order_acquire)) {
      (void)trim_stream_events(device_);
    }
  });
  flush_deferred_releases();
  drained.store(true, std::memory_order_release);
  trimmer.join();
  for (const auto& probe : probes) {
    ASSERT_EQ(probe->calls(), 1);
    ASSERT_EQ(probe->stream_status_at_delete(), std::vector<cudaError_t>{cudaSuccess})
        << "a deleter ran before the busy stream finished";
  }
  (void)trim_stream_events(device_);
  EXPECT_EQ(created_stream_events(device_), baseline) << "an event was lost or destroyed twice";

  // The pool makes events anew after the trim, and a hop over them still orders the reads.
  constexpr std::uint32_t kSeed = 23;
  DeleterProbe probe;
  auto buffer = make_buffer(probe);
  auto* data = static_cast<std::uint32_t*>(buffer->managed_tensor()->dl_tensor.data);
  DeviceArray<CheckResult> result(1);
  cudaStream_t producer = make_stream();
  cudaStream_t consumer = make_stream();
  HDL_ASSERT_CUDA(launch_slow_fill(data, kElements, kSeed, 100'000, producer));
  ASSERT_TRUE(buffer->set_readiness_stream(producer));
  ASSERT_TRUE(buffer->synchronize_for_consumer(consumer).has_value());
  HDL_ASSERT_CUDA(launch_check(data, kElements, kSeed, 0, result.get(), consumer));
  ASSERT_TRUE(buffer->set_deallocation_stream(consumer));
  buffer.reset();
  HDL_ASSERT_CUDA(cudaStreamSynchronize(consumer));
  EXPECT_EQ(result.at(0).mismatches, 0u) << "the consumer read before the producer's writes";
  flush_deferred_releases();
  EXPECT_EQ(probe.calls(), 1);
}

// Readiness moving back and forth between two devices reuses one event per device.
TEST_F(ReleaseSafetyTest, AlternatingReadinessDevicesKeepsOneEventPerDevice) {
  if (device_count() < 2) {
    GTEST_SKIP() << "needs two CUDA devices, found " << device_count();
  }
  cudaStream_t on_first = make_stream(0);
  cudaStream_t on_second = make_stream(1);
  DLManagedMemoryBufferVersioned buffer(nullptr);
  ASSERT_TRUE(buffer.set_readiness_stream(on_first));
  ASSERT_TRUE(buffer.set_readiness_stream(on_second));
  ASSERT_TRUE(buffer.set_readiness_stream(on_first));
  const std::size_t first_events = created_stream_events(0);
  const std::size_t second_events = created_stream_events(1);
  for (int round = 0; round < 100; ++round) {
    ASSERT_TRUE(buffer.set_readiness_stream(round % 2 == 0 ? on_second : on_first));
  }
  EXPECT_EQ(created_stream_events(0), first_events);
  EXPECT_EQ(created_stream_events(1), second_events);
  HDL_ASSERT_CUDA(cudaStreamSynchronize(on_first));
  HDL_ASSERT_CUDA(cudaStreamSynchronize(on_second));
}

// A forked child cannot use its parent's CUDA context: an owner the parent recorded a point on,
// dropped in the child, must neither run its deleter there (a device deleter calls into a runtime
// the child cannot use) nor hang; the parent still runs it, once, after its GPU work.
TEST_F(ReleaseSafetyTest, AForkedChildNeverRunsTheDeleterOfAnOwnerItsParentRecordedOn) {
  DeleterProbe probe;
  cudaStream_t stream = make_stream();
  auto buffer = make_buffer(probe);
  HDL_ASSERT_CUDA(launch_spin(200'000, stream));
  ASSERT_TRUE(buffer->set_deallocation_stream(stream));
  std::fflush(nullptr);
  const pid_t child = ::fork();
  ASSERT_NE(child, -1);
  if (child == 0) {
    ::alarm(30);     // a hang shows as SIGALRM, not as a stuck suite
    buffer.reset();  // the child's copy of the owner
    flush_deferred_releases();
    ::_exit(probe.calls());  // no atexit handler: they would call into CUDA
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "the child did not exit: status " << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child ran its parent's deleter";
  EXPECT_EQ(probe.calls(), 0);
  buffer.reset();
  flush_deferred_releases();
  EXPECT_EQ(probe.calls(), 1);
}

}  // namespace
}  // namespace holoscan::test
