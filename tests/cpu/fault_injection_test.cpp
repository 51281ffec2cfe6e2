// Covers every CUDA failure the owners and the pool can meet, against the fake runtime: each gives
// a clear Error or `false`, leaks nothing, runs the producer's deleter exactly once and never
// hangs.
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "cuda/cuda_error.hpp"
#include "holoscan/cuda_stream_sync.hpp"
#include "holoscan/deferred_release.hpp"
#include "holoscan/dlpack.hpp"
#include "holoscan/event_pool.hpp"
#include "holoscan/tensor_pool.hpp"
#include "support/counting_producer.hpp"
#include "support/fake_cuda_test.hpp"
#include "support/gtest_printers.hpp"

namespace holoscan {
namespace {

using test::CountingProducer;
using test::CudaEntry;

using Buffer = DLManagedMemoryBufferVersioned;

// A CUDA failure reported as the contract says: kFailure, the call and the error's name in the
// message, the cudaError_t in provenance.
void expect_cuda_error(const Error& error, const char* call, cudaError_t status) {
  EXPECT_EQ(error.code, ErrorCode::kFailure) << error.message;
  EXPECT_EQ(error.provenance, static_cast<std::uint64_t>(status));
  EXPECT_NE(error.message.find(call), std::string::npos) << error.message;
  const char* name = test::FakeCuda::error_name(status);
  ASSERT_NE(name, nullptr) << "the fake runtime does not name " << static_cast<int>(status);
  EXPECT_NE(error.message.find(name), std::string::npos) << error.message;
}

// Whether the CUDA driver's library is loaded in this process (never loads it).
bool driver_loaded() {
  void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (driver != nullptr) {
    dlclose(driver);
  }
  return driver != nullptr;
}

class FaultInjection : public test::FakeCudaTest {};

class FaultInjectionTwoDevices : public test::FakeCudaTest {
 protected:
  FaultInjectionTwoDevices() : FakeCudaTest(2) {}
};

TEST_F(FaultInjection, BusyDeallocationStreamDefersTheDeleterToTheReleaseThread) {
  CountingProducer producer;
  cudaStream_t stream = fake().create_stream(0);
  auto buffer = std::make_unique<Buffer>(producer.make_versioned());
  fake().launch(stream);
  ASSERT_TRUE(buffer->set_deallocation_stream(stream));
  EXPECT_EQ(buffer->deallocation_point_count(), 1u);

  const std::uint64_t queries = fake().calls(CudaEntry::kEventQuery);
  buffer.reset();  // returns at once although the stream is busy
  EXPECT_EQ(producer.deleter_calls(), 0);
  EXPECT_EQ(pending_deferred_releases(), 1u);
  // The release thread has looked at the point (more than once) and still holds the release.
  ASSERT_TRUE(wait_for_calls(CudaEntry::kEventQuery, queries, 3));
  EXPECT_EQ(producer.deleter_calls(), 0);
  EXPECT_EQ(pending_deferred_releases(), 1u);

  fake().complete(stream);
  flush_deferred_releases();
  EXPECT_EQ(producer.deleter_calls(), 1);
  EXPECT_NE(producer.last_deleter_thread(), std::this_thread::get_id());
  EXPECT_EQ(pending_deferred_releases(), 0u);
  flush_deferred_releases();
  EXPECT_EQ(producer.deleter_calls(), 1);
}

TEST_F(FaultInjection, RecordFailureLeavesTheStateUnchangedAndReturnsTheEvent) {
  CountingProducer producer;
  cudaStream_t stream = fake().create_stream(0);
  {
    Buffer buffer(producer.make_versioned());
    fake().fail_next(CudaEntry::kEventRecord, cudaErrorLaunchFailure);
    EXPECT_FALSE(buffer.set_readiness_stream(stream));
    EXPECT_FALSE(buffer.has_readiness_stream_contract());
    EXPECT_EQ(buffer.readiness_stream(), nullptr);
    // The failure is not left behind for the caller's own cudaGetLastError.
    EXPECT_EQ(fake().last_error(), cudaSuccess);

    fake().fail_next(CudaEntry::kEventRecord, cudaErrorLaunchFailure);
    EXPECT_FALSE(buffer.set_deallocation_stream(stream));
    EXPECT_EQ(buffer.deallocation_point_count(), 0u);

    // The event went back to the pool: the next record reuses it.
    EXPECT_EQ(created_stream_events(0), 1u);
    EXPECT_TRUE(buffer.set_readiness_stream(stream));
    EXPECT_EQ(created_stream_events(0), 1u);
    EXPECT_EQ(fake().calls(CudaEntry::kEventCreateWithFlags), 1u);
    EXPECT_EQ(fake().calls(CudaEntry::kEventRecord), 3u);
  }
  // A point was recorded (on an idle stream): the destructor never queries it, the release
  // thread settles it.
  flush_deferred_releases();
  EXPECT_EQ(producer.deleter_calls(), 1);
  EXPECT_NE(producer.last_deleter_thread(), std::this_thread::get_id());
  EXPECT_EQ(pending_deferred_releases(), 0u);
}

TEST_F(FaultInjection, WaitFailureIsACudaErrorNamingTheCall) {
  CountingProducer producer;
  cudaStream_t producer_stream = fake().create_stream(0);
  cudaStream_t consumer = fake().create_stream(0);
  Buffer buffer(producer.make_versioned());
  ASSERT_TRUE(buffer.set_readiness_stream(producer_stream));

  fake().fail_next(CudaEntry::kStreamWaitEvent, cudaErrorLaunchFailure);
  const expected<void> waited = buffer.synchronize_for_consumer(consumer);
  ASSERT_FALSE(waited.has_value());
  expect_cuda_error(waited.error(), "cudaStreamWaitEvent", cudaErrorLaunchFailure);
  EXPECT_EQ(fake().last_error(), cudaSuccess);

  EXPECT_TRUE(buffer.synchronize_for_consumer(consumer).has_value());  // the fault was one call
  EXPECT_TRUE(buffer.synchronize_for_consumer(producer_stream).has_value());  // no call at all
  EXPECT_EQ(fake().calls(CudaEntry::kStreamWaitEvent), 2u);
}

TEST_F(FaultInjection, WaitOnACapturingConsumerExplainsTheCapture) {
  CountingProducer producer;
  cudaStream_t producer_stream = fake().create_stream(0);
  cudaStream_t consumer = fake().create_stream(0);
  Buffer buffer(producer.make_versioned());
  ASSERT_TRUE(buffer.set_readiness_stream(producer_stream));

  fake().set_capture(consumer, cudaStreamCaptureStatusActive);
  const expected<void> waited = buffer.synchronize_for_consumer(consumer);
  ASSERT_FALSE(waited.has_value());
  expect_cuda_error(waited.error(), "cudaStreamWaitEvent", cudaErrorStreamCaptureIsolation);
  EXPECT_NE(waited.error().message.find("capturing"), std::string::npos);

  // Points cannot be recorded on a capturing stream: refused before any record.
  EXPECT_FALSE(buffer.set_deallocation_stream(consumer));
  EXPECT_FALSE(buffer.set_readiness_stream(consumer));
  EXPECT_EQ(buffer.readiness_stream(), producer_stream);
  EXPECT_EQ(fake().calls(CudaEntry::kEventRecord), 1u);
}

// The producer's own stream needs no wait, but once it captures a CUDA graph what it captures
// runs when the graph is launched, on any stream, unordered with the point recorded before the
// capture: like any capturing consumer it is refused, not told that it is ordered.
TEST_F(FaultInjection, WaitOnTheProducerStreamWhileItCapturesIsRefusedToo) {
  CountingProducer producer;
  cudaStream_t producer_stream = fake().create_stream(0);
  Buffer buffer(producer.make_versioned());
  ASSERT_TRUE(buffer.set_readiness_stream(producer_stream));
  EXPECT_TRUE(buffer.synchronize_for_consumer(producer_stream).has_value());
  EXPECT_EQ(fake().calls(CudaEntry::kStreamWaitEvent), 0u);  // not capturing: no wait at all

  fake().set_capture(producer_stream, cudaStreamCaptureStatusActive);
  const expected<void> waited = buffer.synchronize_for_consumer(producer_stream);
  ASSERT_FALSE(waited.has_value()) << "a capturing producer stream was told it is ordered";
  expect_cuda_error(waited.error(), "cudaStreamWaitEvent", cudaErrorStreamCaptureIsolation);
  EXPECT_NE(waited.error().message.find("capturing"), std::string::npos);
  EXPECT_EQ(fake().last_error(), cudaSuccess);
  fake().set_capture(producer_stream, cudaStreamCaptureStatusNone);

  // A capture status that cannot be asked makes the wait, whose answer is CUDA's.
  fake().fail_next(CudaEntry::kStreamIsCapturing, cudaErrorLaunchFailure);
  EXPECT_TRUE(buffer.synchronize_for_consumer(producer_stream).has_value());
  EXPECT_EQ(fake().calls(CudaEntry::kStreamWaitEvent), 2u);
  EXPECT_EQ(fake().last_error(), cudaSuccess);
}

// A host wait asked for by the caller (synchronize_for_host, synchronize_cuda_stream_for_host)
// while another stream captures a graph in global mode: made in relaxed mode, it neither fails nor
// invalidates that capture (CUDA refuses a wait from a thread in global mode then).
TEST_F(FaultInjection, HostWaitsNeverInvalidateAnotherThreadsCapture) {
  CountingProducer producer;
  cudaStream_t producer_stream = fake().create_stream(0);
  cudaStream_t captured = fake().create_stream(0);
  Buffer buffer(producer.make_versioned());
  ASSERT_TRUE(buffer.set_readiness_stream(producer_stream));
  fake().set_capture(captured, cudaStreamCaptureStatusActive);
  const auto capture = [&] {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    EXPECT_EQ(test::FakeCuda::table().stream_is_capturing(captured, &status), cudaSuccess);
    return status;
  };
  const expected<void> waited = buffer.synchronize_for_host();
  EXPECT_TRUE(waited.has_value()) << waited.error().message;
  EXPECT_EQ(capture(), cudaStreamCaptureStatusActive) << "the wait invalidated the capture";
  const expected<void> synchronized = synchronize_cuda_stream_for_host(producer_stream);
  EXPECT_TRUE(synchronized.has_value()) << synchronized.error().message;
  EXPECT_EQ(capture(), cudaStreamCaptureStatusActive) << "the wait invalidated the capture";
  fake().set_capture(captured, cudaStreamCaptureStatusNone);
}

// Memory freed on a caller's thread (a device pool destroyed with its blocks idle, a pinned-host
// copy dropped) is freed in relaxed mode: another thread's capture stays valid, nothing leaks.
TEST_F(FaultInjection, FreesOnTheCallersThreadNeverInvalidateAnotherThreadsCapture) {
  cudaStream_t captured = fake().create_stream(0);
  cudaStream_t copier = fake().create_stream(0);
  const std::size_t allocations_before = fake().live_allocations();
  auto device_pool = TensorPool::create(TensorPoolConfig{PoolMemory::kDevice, 0, 256, 2});
  ASSERT_TRUE(device_pool.has_value()) << device_pool.error().message;
  auto host_pool = TensorPool::create(TensorPoolConfig{PoolMemory::kHost, 0, 256, 1});
  ASSERT_TRUE(host_pool.has_value()) << host_pool.error().message;
  std::optional<Tensor> pinned;
  {
    auto source = (*host_pool)->allocate({16}, DLDataType{kDLFloat, 32, 1});
    ASSERT_TRUE(source.has_value()) << source.error().message;
    auto copied = source->copy_to(DLDevice{kDLCUDAHost, 0}, copier);
    ASSERT_TRUE(copied.has_value()) << copied.error().message;
    pinned = std::move(*copied);
  }
  ASSERT_GT(fake().live_allocations(), allocations_before);

  fake().set_capture(captured, cudaStreamCaptureStatusActive);
  pinned.reset();
  device_pool->reset();
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  EXPECT_EQ(test::FakeCuda::table().stream_is_capturing(captured, &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusActive) << "a free invalidated the capture";
  fake().set_capture(captured, cudaStreamCaptureStatusNone);
  flush_deferred_releases();
  EXPECT_EQ(fake().live_allocations(), allocations_before) << "a free was refused: memory leaked";
}

// Memory allocated on a caller's thread (a device pool made, a copy to pinned or managed memory)
// is allocated in relaxed mode: another thread's capture stays valid and the allocation succeeds.
TEST_F(FaultInjection, AllocationsOnTheCallersThreadNeverInvalidateAnotherThreadsCapture) {
  cudaStream_t captured = fake().create_stream(0);
  cudaStream_t copier = fake().create_stream(0);
  auto host_pool = TensorPool::create(TensorPoolConfig{PoolMemory::kHost, 0, 256, 1});
  ASSERT_TRUE(host_pool.has_value()) << host_pool.error().message;
  auto source = (*host_pool)->allocate({16}, DLDataType{kDLFloat, 32, 1});
  ASSERT_TRUE(source.has_value()) << source.error().message;
  const auto capture = [&] {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    EXPECT_EQ(test::FakeCuda::table().stream_is_capturing(captured, &status), cudaSuccess);
    return status;
  };

  fake().set_capture(captured, cudaStreamCaptureStatusActive);
  auto device_pool = TensorPool::create(TensorPoolConfig{PoolMemory::kDevice, 0, 256, 2});
  EXPECT_TRUE(device_pool.has_value()) << device_pool.error().message;
  EXPECT_EQ(capture(), cudaStreamCaptureStatusActive) << "cudaMalloc invalidated the capture";
  auto pinned = source->copy_to(DLDevice{kDLCUDAHost, 0}, copier);
  EXPECT_TRUE(pinned.has_value()) << pinned.error().message;
  EXPECT_EQ(capture(), cudaStreamCaptureStatusActive) << "cudaMallocHost invalidated the capture";
  auto managed = source->copy_to(DLDevice{kDLCUDAManaged, 0}, copier);
  EXPECT_TRUE(managed.has_value()) << managed.error().message;
  EXPECT_EQ(capture(), cudaStreamCaptureStatusActive)
      << "cudaMallocManaged invalidated the capture";
  fake().set_capture(captured, cudaStreamCaptureStatusNone);
}

// A device copy that failed before any point was recorded frees its memory on the caller's thread:
// not on that thread's per-thread stream while the thread captures it (the free would go into the
// graph instead of running), but synchronously.
TEST_F(FaultInjection, AFailedCopyNeverFreesIntoTheCallersCapturingPerThreadStream) {
  cudaStream_t copier = fake().create_stream(0);
  auto host_pool = TensorPool::create(TensorPoolConfig{PoolMemory::kHost, 0, 256, 1});
  ASSERT_TRUE(host_pool.has_value()) << host_pool.error().message;
  auto source = (*host_pool)->allocate({16}, DLDataType{kDLFloat, 32, 1});
  ASSERT_TRUE(source.has_value()) << source.error().message;
  const std::size_t allocations_before = fake().live_allocations();
  const std::uint64_t frees_async = fake().calls(CudaEntry::kFreeAsync);
  const std::uint64_t frees = fake().calls(CudaEntry::kFree);

  fake().set_capture(cudaStreamPerThread, cudaStreamCaptureStatusActive);
  fake().fail_next(CudaEntry::kMemcpyAsync, cudaErrorLaunchFailure, 1);
  fake().fail_next(CudaEntry::kEventRecord, cudaErrorLaunchFailure, 1 << 20);  // no point at all
  auto copied = source->copy_to(DLDevice{kDLCUDA, 0}, copier);
  fake().clear_faults();
  fake().set_capture(cudaStreamPerThread, cudaStreamCaptureStatusNone);
  ASSERT_FALSE(copied.has_value());
  EXPECT_EQ(fake().calls(CudaEntry::kFreeAsync), frees_async) << "freed into the capture";
  EXPECT_EQ(fake().calls(CudaEntry::kFree), frees + 1);
  flush_deferred_releases();
  EXPECT_EQ(fake().live_allocations(), allocations_before) << "the copy's memory leaked";
}

TEST_F(FaultInjection, CaptureErrorOnQueryMeansNotYetEvenWhenTheStreamIsDone) {
  CountingProducer producer;
  cudaStream_t stream = fake().create_stream(0);
  test::drop_pending(fake(), producer.make_versioned(), stream);
  ASSERT_EQ(pending_deferred_releases(), 1u);

  // Every query is refused by a capture from here on, although the GPU has passed the point.
  fake().fail_next(CudaEntry::kEventQuery, cudaErrorStreamCaptureUnsupported, 1 << 30);
  fake().complete(stream);
  const std::uint64_t queries = fake().calls(CudaEntry::kEventQuery);
  ASSERT_TRUE(wait_for_calls(CudaEntry::kEventQuery, queries, 3));
  EXPECT_EQ(producer.deleter_calls(), 0);
  EXPECT_EQ(pending_deferred_releases(), 1u);

  fake().clear_faults();
  flush_deferred_releases();
  EXPECT_EQ(producer.deleter_calls(), 1);
}

TEST_F(FaultInjection, StickyErrorOnQueryReleasesOnceSinceNoMoreWorkCanRun) {
  CountingProducer producer;
  cudaStream_t stream = fake().create_stream(0);
  test::drop_pending(fake(), producer.make_versioned(), stream);
  ASSERT_EQ(pending_deferred_releases(), 1u);

  // The stream never completes: the broken context is what lets the release go.
  fake().fail_next(CudaEntry::kEventQuery, cudaErrorIllegalAddress);
  flush_deferred_releases();
  EXPECT_EQ(producer.deleter_calls(), 1);
  EXPECT_EQ(pending_deferred_releases(), 0u);
}

TEST_F(FaultInjection, HostWaitFailureIsACudaErrorAndDoesNotBlock) {
  CountingProducer producer;
  cudaStream_t stream = fake().create_stream(0);
  Buffer buffer(producer.make_versioned());
  fake().launch(stream);
  ASSERT_TRUE(buffer.set_readiness_stream(stream));

  fake().fail_next(CudaEntry::kEventSynchronize, cudaErrorIllegalAddress);
  const expected<void> waited = buffer.synchronize_for_host();
  ASSERT_FALSE(waited.has_value());
  expect_cuda_error(waited.error(), "cudaEventSynchronize", cudaErrorIllegalAddress);

  // Without a fault the host wait blocks until the stream passes the point.
  auto host_wait = std::async(std::launch::async, [&] { return buffer.synchronize_for_host(); });
  EXPECT_EQ(host_wait.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout);
  fake().complete(stream);
  EXPECT_TRUE(host_wait.get().has_value());
}

TEST_F(FaultInjection, EventCreationFailureIsReportedAndCreatesNothing) {
  CountingProducer producer;
  cudaStream_t stream = fake().create_stream(0);
  {
    Buffer buffer(producer.make_versioned());
    fake().fail_next(CudaEntry::kEventCreateWithFlags, cudaErrorMemoryAllocation, 2);
    EXPECT_FALSE(buffer.set_readiness_stream(stream));
    EXPECT_FALSE(buffer.set_deallocation_stream(stream));
    EXPECT_FALSE(buffer.has_readiness_stream_contract());
    EXPECT_EQ(buffer.deallocation_point_count(), 0u);
    EXPECT_EQ(fake().calls(CudaEntry::kEventRecord), 0u);
  }
  EXPECT_EQ(producer.deleter_calls(), 1);

  fake().fail_next(CudaEntry::kEventCreateWithFlags, cudaErrorMemoryAllocation);
  const expected<void> reserved = reserve_stream_events(0, 2);
  ASSERT_FALSE(reserved.has_value());
  expect_cuda_error(reserved.error(), "cudaEventCreateWithFlags", cudaErrorMemoryAllocation);
  EXPECT_EQ(created_stream_events(0), 0u);
  EXPECT_EQ(fake().live_events(), 0u);
}

TEST_F(FaultInjectionTwoDevices, SetDeviceFailureIsReportedAndTheCurrentDeviceKept) {
  CountingProducer producer;
  cudaStream_t on_device_1 = fake().create_stream(1);
  {
    Buffer buffer(producer.make_versioned());
    fake().fail_next(CudaEntry::kSetDevice, cudaErrorDevicesUnavailable);
    EXPECT_FALSE(buffer.set_readiness_stream(on_device_1));
    EXPECT_FALSE(buffer.has_readiness_stream_contract());
    EXPECT_EQ(fake().current_device(), 0);
  }
  EXPECT_EQ(producer.deleter_calls(), 1);

  fake().fail_next(CudaEntry::kSetDevice, cudaErrorDevicesUnavailable);
  const expected<void> reserved = reserve_stream_events(1, 1);
  ASSERT_FALSE(reserved.has_value());
  expect_cuda_error(reserved.error(), "cudaSetDevice", cudaErrorDevicesUnavailable);
  EXPECT_EQ(created_stream_events(1), 0u);
  EXPECT_EQ(fake().current_device(), 0);
}

// A device the process lacks was kFailure ("cudaSetDevice failed: cudaErrorInvalidDevice") below
// id 64 and kInvalidArgument from 64 on; now the caller's argument either way, and every refusal
// names reserve_stream_events.
TEST_F(FaultInjectionTwoDevices, ReserveOnADeviceTheProcessLacksIsAnInvalidArgument) {
  const struct {
    int device;
    const char* says;
  } cases[] = {
      {5,
       "reserve_stream_events: event pool: device 5 is not a CUDA device of this process: "
       "cudaSetDevice failed: "},
      {-1, "reserve_stream_events: event pool: device -1 is out of range (0 to 63)"},
      {64, "reserve_stream_events: event pool: device 64 is out of range (0 to 63)"},
  };
  for (const auto& each : cases) {
    const expected<void> reserved = reserve_stream_events(each.device, 1);
    ASSERT_FALSE(reserved.has_value()) << each.device;
    EXPECT_EQ(reserved.error().code, ErrorCode::kInvalidArgument) << reserved.error().message;
    EXPECT_EQ(reserved.error().message.rfind(each.says, 0), 0u) << reserved.error().message;
    EXPECT_EQ(created_stream_events(each.device), 0u);
  }
  EXPECT_EQ(fake().current_device(), 0);
}

TEST_F(FaultInjectionTwoDevices, SetDeviceFailureOnTheReleaseThreadStillReleasesOnce) {
  CountingProducer producer;
  cudaStream_t on_device_1 = fake().create_stream(1);
  test::drop_pending(fake(), producer.make_versioned(), on_device_1);
  EXPECT_EQ(fake().current_device(), 0);  // the guard put the caller's device back

  fake().fail_next(CudaEntry::kSetDevice, cudaErrorDevicesUnavailable, 5);
  fake().complete(on_device_1);
  flush_deferred_releases();
  EXPECT_EQ(producer.deleter_calls(), 1);
}

TEST_F(FaultInjection, DestroyedStreamIsRefusedWithItsError) {
  CountingProducer producer;
  cudaStream_t producer_stream = fake().create_stream(0);
  cudaStream_t destroyed = fake().create_stream(0);
  fake().destroy_stream(destroyed);
  {
    Buffer buffer(producer.make_versioned());
    EXPECT_FALSE(buffer.set_readiness_stream(destroyed));
    EXPECT_FALSE(buffer.set_deallocation_stream(destroyed));
    EXPECT_EQ(buffer.deallocation_point_count(), 0u);

    ASSERT_TRUE(buffer.set_readiness_stream(producer_stream));
    const expected<void> waited = buffer.synchronize_for_consumer(destroyed);
    ASSERT_FALSE(waited.has_value());
    expect_cuda_error(waited.error(), "cudaStreamWaitEvent", cudaErrorInvalidResourceHandle);
    EXPECT_EQ(fake().last_error(), cudaSuccess);
  }
  flush_deferred_releases();
  EXPECT_EQ(producer.deleter_calls(), 1);
}

TEST_F(FaultInjection, StreamDestroyedAfterItsPointStillOrdersTheRelease) {
  CountingProducer producer;
  cudaStream_t stream = fake().create_stream(0);
  test::drop_pending(fake(), producer.make_versioned(), stream);
  fake().destroy_stream(stream);  // as in CUDA, its queued work still runs to the end
  EXPECT_EQ(pending_deferred_releases(), 1u);
  EXPECT_EQ(producer.deleter_calls(), 0);

  fake().complete(stream);
  flush_deferred_releases();
  EXPECT_EQ(producer.deleter_calls(), 1);
}

// TensorPool is only created, allocated from and counted here.
std::shared_ptr<TensorPool> device_pool(int device, std::size_t blocks,
                                        expected<std::shared_ptr<TensorPool>>* result = nullptr) {
  TensorPoolConfig config;
  config.memory = PoolMemory::kDevice;
  config.device = device;
  config.block_bytes = 1024;
  config.block_count = blocks;
  expected<std::shared_ptr<TensorPool>> pool = TensorPool::create(config);
  std::shared_ptr<TensorPool> created = pool.has_value() ? *pool : nullptr;
  if (result != nullptr) {
    *result = std::move(pool);
  }
  return created;
}

TEST_F(FaultInjection, DeviceMallocOutOfMemoryIsResourceExhausted) {
  fake().fail_next(CudaEntry::kMalloc, cudaErrorMemoryAllocation);
  expected<std::shared_ptr<TensorPool>> result;
  EXPECT_EQ(device_pool(0, 4, &result), nullptr);
  ASSERT_FALSE(result.has_value());
  const Error& error = result.error();
  EXPECT_EQ(error.code, ErrorCode::kResourceExhausted) << error.message;
  EXPECT_EQ(error.provenance, static_cast<std::uint64_t>(cudaErrorMemoryAllocation));
  EXPECT_NE(error.message.find("cudaMalloc"), std::string::npos) << error.message;
  EXPECT_NE(error.message.find("cudaErrorMemoryAllocation"), std::string::npos) << error.message;
  EXPECT_EQ(fake().live_allocations(), 0u);
  EXPECT_EQ(fake().calls(CudaEntry::kFree), 0u);
}

TEST_F(FaultInjection, DeviceMallocOtherFailureIsACudaError) {
  fake().fail_next(CudaEntry::kMalloc, cudaErrorInvalidValue);
  expected<std::shared_ptr<TensorPool>> result;
  EXPECT_EQ(device_pool(0, 4, &result), nullptr);
  ASSERT_FALSE(result.has_value());
  expect_cuda_error(result.error(), "cudaMalloc", cudaErrorInvalidValue);
  EXPECT_EQ(fake().live_allocations(), 0u);
}

TEST_F(FaultInjectionTwoDevices, DevicePoolSetDeviceFailureIsACudaError) {
  fake().fail_next(CudaEntry::kSetDevice, cudaErrorDevicesUnavailable);
  expected<std::shared_ptr<TensorPool>> result;
  EXPECT_EQ(device_pool(1, 4, &result), nullptr);
  ASSERT_FALSE(result.has_value());
  expect_cuda_error(result.error(), "cudaSetDevice", cudaErrorDevicesUnavailable);
  EXPECT_EQ(fake().calls(CudaEntry::kMalloc), 0u);
  EXPECT_EQ(fake().current_device(), 0);
}

TEST_F(FaultInjection, DevicePoolMemoryIsFreedOnceTheGpuIsDone) {
  cudaStream_t stream = fake().create_stream(0);
  std::shared_ptr<TensorPool> pool = device_pool(0, 2);
  ASSERT_NE(pool, nullptr);
  EXPECT_EQ(fake().live_allocations(), 1u);
  {
    expected<Tensor> tensor = pool->allocate({16}, DLDataType{kDLFloat, 32, 1});
    ASSERT_TRUE(tensor.has_value()) << tensor.error().message;
    fake().launch(stream);
    ASSERT_TRUE(tensor->set_deallocation_stream(stream));
  }
  EXPECT_EQ(pool->available_blocks(), 1u);  // the GPU may still use the dropped block

  pool.reset();  // never blocks: the memory goes once the stream passes the point
  EXPECT_EQ(pending_deferred_releases(), 1u);
  EXPECT_EQ(fake().calls(CudaEntry::kFree), 0u);
  fake().complete(stream);
  flush_deferred_releases();
  EXPECT_EQ(fake().calls(CudaEntry::kFree), 1u);
  EXPECT_EQ(fake().live_allocations(), 0u);
}

// Holoscan 5.0 words a failed call of its stream synchronizations "<call> failed during Tensor
// host sync: ..." and "<call> failed during Tensor stream sync: ..."; ours contains that sentence,
// then CUDA's error name, with the cudaError_t in provenance.
TEST_F(FaultInjection, StreamSynchronizationFailuresSay50sMessages) {
  const cudaStream_t producer = fake().create_stream(0);
  const cudaStream_t consumer = fake().create_stream(0);
  const auto expect_failure = [](const expected<void, Error>& result, const std::string& text) {
    ASSERT_FALSE(result.has_value());
    EXPECT_EQ(result.error().code, ErrorCode::kFailure);
    EXPECT_EQ(result.error().provenance, static_cast<std::uint64_t>(cudaErrorLaunchFailure));
    EXPECT_NE(result.error().message.find(text), std::string::npos) << result.error().message;
    EXPECT_NE(result.error().message.find("cudaErrorLaunchFailure"), std::string::npos)
        << result.error().message;
  };
  fake().fail_next(CudaEntry::kStreamSynchronize, cudaErrorLaunchFailure);
  expect_failure(synchronize_cuda_stream_for_host(producer),
                 "cudaStreamSynchronize failed during Tensor host sync: ");
  fake().fail_next(CudaEntry::kEventRecord, cudaErrorLaunchFailure);
  expect_failure(synchronize_cuda_streams(producer, consumer),
                 "cudaEventRecord failed during Tensor stream sync: ");
  fake().fail_next(CudaEntry::kStreamWaitEvent, cudaErrorLaunchFailure);
  expect_failure(synchronize_cuda_streams(producer, consumer),
                 "cudaStreamWaitEvent failed during Tensor stream sync: ");
  EXPECT_TRUE(synchronize_cuda_streams(producer, consumer).has_value());
}

// The fake names a failure itself: the real runtime's lookup (CUDA 13) loads and initialises the
// driver wherever one is installed, which opened a dozen device files in a test process that
// counts its descriptors (IpcReleaseProtocol, on a GPU host).
TEST_F(FaultInjection, AFailureIsNamedWithoutTheRealRuntime) {
  const bool driver_was_loaded = driver_loaded();
  const Error error = detail::cuda_error(cudaErrorLaunchFailure, "cudaEventRecord");
  EXPECT_EQ(error.message, "cudaEventRecord failed: cudaErrorLaunchFailure (fake runtime error)");
  if (!driver_was_loaded) {
    EXPECT_FALSE(driver_loaded()) << "naming a failure of the fake loaded the CUDA driver";
  }
}

}  // namespace
}  // namespace holoscan
