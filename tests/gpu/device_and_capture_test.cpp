// Device handling (the caller's current device survives every hook; streams of another device)
// and CUDA graph capture (hooks refuse a capturing stream; a consumer wait under capture).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <future>
#include <holoscan/cuda_stream_sync.hpp>
#include <holoscan/deferred_release.hpp>
#include <holoscan/dlpack.hpp>
#include <holoscan/event_pool.hpp>
#include <holoscan/tensor.hpp>
#include <holoscan/tensor_pool.hpp>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

#include "gpu/gpu_test_fixture.hpp"
#include "gpu/kernels.hpp"

namespace holoscan::test {
namespace {

constexpr std::int64_t kElements = 1 << 14;
constexpr std::size_t kBytes = kElements * sizeof(std::uint32_t);

class DeviceTest : public GpuTest {
 protected:
  // Fails the test unless `device` is the calling thread's current device.
  static void expect_current(int device, const char* after) {
    int current = -1;
    EXPECT_EQ(cudaGetDevice(&current), cudaSuccess);
    EXPECT_EQ(current, device) << "the current device changed in " << after;
  }
};

// Streams and memory live on device 0 while the caller's current device is the last one (the
// same device on a one-GPU machine, where only "unchanged" is checked).
TEST_F(DeviceTest, HooksKeepTheCallersCurrentDevice) {
  const int work_device = 0;
  const int current = device_count() - 1;
  HDL_ASSERT_CUDA(cudaSetDevice(work_device));
  const cudaStream_t producer = make_stream(work_device);
  const cudaStream_t consumer = make_stream(work_device);
  DeviceArray<CheckResult> results(2);
  std::uint32_t* data = device_alloc_zeroed(kElements);
  std::uint32_t* other = device_alloc_zeroed(kElements);
  ASSERT_NE(data, nullptr);
  ASSERT_NE(other, nullptr);
  DeleterProbe probe;
  DeleterProbe tensor_probe;
  auto buffer = std::make_shared<DLManagedMemoryBufferVersioned>(
      make_versioned_device_tensor(DeviceTensorSpec{data, kElements, work_device, &probe, true}));
  auto imported = make_tensor_from_dlpack_versioned(make_versioned_device_tensor(
      DeviceTensorSpec{other, kElements, work_device, &tensor_probe, true}));
  ASSERT_TRUE(imported.has_value()) << imported.error().message;
  Tensor tensor = std::move(*imported);
  HDL_ASSERT_CUDA(launch_slow_fill(data, kElements, 1, 2'000, producer));
  HDL_ASSERT_CUDA(launch_slow_fill(other, kElements, 2, 2'000, producer));

  HDL_ASSERT_CUDA(cudaSetDevice(current));
  EXPECT_TRUE(buffer->set_readiness_stream(producer));
  expect_current(current, "set_readiness_stream");
  auto synced = buffer->synchronize_for_consumer(consumer);
  EXPECT_TRUE(synced.has_value()) << synced.error().message;
  expect_current(current, "synchronize_for_consumer");
  EXPECT_TRUE(buffer->synchronize_for_host().has_value());
  expect_current(current, "synchronize_for_host");
  EXPECT_TRUE(tensor.set_readiness_stream(producer));
  expect_current(current, "Tensor::set_readiness_stream");
  EXPECT_TRUE(tensor.synchronize_for_consumer_stream(consumer).has_value());
  expect_current(current, "Tensor::synchronize_for_consumer");

  HDL_ASSERT_CUDA(cudaSetDevice(work_device));  // a kernel launch needs its stream's device
  HDL_ASSERT_CUDA(launch_check(data, kElements, 1, 50'000, results.get(0), consumer));
  HDL_ASSERT_CUDA(launch_check(other, kElements, 2, 50'000, results.get(1), consumer));
  HDL_ASSERT_CUDA(cudaSetDevice(current));

  EXPECT_TRUE(buffer->set_deallocation_stream(consumer));
  expect_current(current, "set_deallocation_stream");
  EXPECT_TRUE(tensor.set_deallocation_stream(consumer));
  expect_current(current, "Tensor::set_deallocation_stream");
  auto exported = tensor.to_dlpack_versioned();
  ASSERT_TRUE(exported.has_value()) << exported.error().message;
  expect_current(current, "Tensor::to_dlpack_versioned");
  EXPECT_TRUE(reserve_stream_events(work_device, 8).has_value());
  expect_current(current, "reserve_stream_events");
  EXPECT_GE(created_stream_events(work_device), 8u);
  // The default-stream handles mean the current device's default stream.
  EXPECT_TRUE(buffer->set_readiness_stream(nullptr));
  expect_current(current, "set_readiness_stream(nullptr)");
  EXPECT_TRUE(buffer->set_deallocation_stream(cudaStreamPerThread));
  expect_current(current, "set_deallocation_stream(cudaStreamPerThread)");

  buffer.reset();  // deferred: the consumer still spins
  expect_current(current, "~DLManagedMemoryBufferVersioned");
  (*exported)->deleter(*exported);
  tensor = Tensor();
  expect_current(current, "~Tensor");
  flush_deferred_releases();
  expect_current(current, "flush_deferred_releases");
  EXPECT_EQ(probe.calls(), 1);
  EXPECT_EQ(tensor_probe.calls(), 1);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(results.at(i).mismatches, 0u) << "consumer " << i;
  }
}

// A producer on device 1 and a consumer on device 0 (current): the readiness event must be one
// of device 1, waited on from device 0; the consumer copies the data across and checks it.
TEST_F(DeviceTest, ProducerOnAnotherDeviceOrdersTheConsumer) {
  if (device_count() < 2) {
    GTEST_SKIP() << "needs two CUDA devices, found " << device_count();
  }
  constexpr std::uint32_t kSeed = 0xC0DE;
  HDL_ASSERT_CUDA(cudaSetDevice(1));
  std::uint32_t* remote = device_alloc_zeroed(kElements);
  ASSERT_NE(remote, nullptr);
  const cudaStream_t producer = make_stream(1);
  HDL_ASSERT_CUDA(cudaSetDevice(0));
  const cudaStream_t consumer = make_stream(0);
  DeviceArray<std::uint32_t> local(kElements);
  DeviceArray<CheckResult> result(1);
  DeleterProbe probe;
  probe.watch({consumer, producer});
  auto buffer = std::make_shared<DLManagedMemoryBufferVersioned>(
      make_versioned_device_tensor(DeviceTensorSpec{remote, kElements, 1, &probe, true}));

  HDL_ASSERT_CUDA(cudaSetDevice(1));
  HDL_ASSERT_CUDA(launch_slow_fill(remote, kElements, kSeed, 5'000, producer));
  HDL_ASSERT_CUDA(cudaSetDevice(0));
  ASSERT_TRUE(buffer->set_readiness_stream(producer)) << "no event recorded on device 1's stream";
  expect_current(0, "set_readiness_stream");
  auto synced = buffer->synchronize_for_consumer(consumer);
  ASSERT_TRUE(synced.has_value()) << synced.error().message;
  expect_current(0, "synchronize_for_consumer");
  HDL_ASSERT_CUDA(cudaMemcpyPeerAsync(local.get(), 0, remote, 1, kBytes, consumer));
  HDL_ASSERT_CUDA(launch_check(local.get(), kElements, kSeed, 0, result.get(), consumer));
  ASSERT_TRUE(buffer->set_deallocation_stream(consumer));
  expect_current(0, "set_deallocation_stream");
  HDL_ASSERT_CUDA(cudaStreamSynchronize(consumer));
  EXPECT_EQ(query_stream(producer), cudaSuccess) << "the consumer did not wait for device 1";
  EXPECT_EQ(result.at(0).mismatches, 0u);
  EXPECT_EQ(result.at(0).checksum, expected_checksum(kSeed, kElements));

  buffer.reset();
  expect_current(0, "~DLManagedMemoryBufferVersioned");
  flush_deferred_releases();
  EXPECT_EQ(probe.calls(), 1);
}

class CaptureTest : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) {
      return;
    }
    capturing_ = make_stream();
    other_ = make_stream();
    ASSERT_NE(capturing_, nullptr);
    ASSERT_NE(other_, nullptr);
    HDL_ASSERT_CUDA(cudaGetDevice(&device_));
    data_ = device_alloc_zeroed(kElements);
    ASSERT_NE(data_, nullptr);
    buffer_ = std::make_shared<DLManagedMemoryBufferVersioned>(
        make_versioned_device_tensor(DeviceTensorSpec{data_, kElements, device_, &probe_, true}));
    // No deferred deleter may touch CUDA while this thread captures.
    flush_deferred_releases();
  }

  void TearDown() override {
    const bool owned = buffer_ != nullptr;
    buffer_.reset();
    GpuTest::TearDown();
    if (owned) {
      EXPECT_EQ(probe_.calls(), 1);
    }
  }

  static cudaStreamCaptureStatus capture_status(cudaStream_t stream) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    EXPECT_EQ(cudaStreamIsCapturing(stream, &status), cudaSuccess);
    return status;
  }

  int device_ = 0;
  cudaStream_t capturing_ = nullptr;
  cudaStream_t other_ = nullptr;
  std::uint32_t* data_ = nullptr;
  DeleterProbe probe_;
  std::shared_ptr<DLManagedMemoryBufferVersioned> buffer_;
};

TEST_F(CaptureTest, HooksRefuseACapturingStreamAndKeepTheirState) {
  constexpr std::uint32_t kSeed = 0xCA97;
  DeviceArray<CheckResult> result(1);
  ASSERT_TRUE(buffer_->set_readiness_stream(other_));
  ASSERT_TRUE(buffer_->set_deallocation_stream(other_));
  // A second owner with no state at all: a refused hook must not create any.
  DeleterProbe fresh_probe;
  DLManagedMemoryBufferVersioned fresh(make_versioned_device_tensor(
      DeviceTensorSpec{data_, kElements, device_, &fresh_probe, /*free_data=*/false}));

  const auto still_capturing = [&](const char* after) {
    EXPECT_EQ(capture_status(capturing_), cudaStreamCaptureStatusActive)
        << after << " invalidated the capture";
    const cudaError_t last = cudaGetLastError();
    EXPECT_EQ(last, cudaSuccess) << after << " left " << cudaGetErrorName(last);
  };
  HDL_ASSERT_CUDA(cudaStreamBeginCapture(capturing_, cudaStreamCaptureModeThreadLocal));
  HDL_EXPECT_CUDA(launch_slow_fill(data_, kElements, kSeed, 0, capturing_));
  still_capturing("the captured kernel launch");
  EXPECT_FALSE(buffer_->set_readiness_stream(capturing_));
  still_capturing("set_readiness_stream");
  EXPECT_FALSE(buffer_->set_deallocation_stream(capturing_));
  still_capturing("set_deallocation_stream");
  EXPECT_FALSE(fresh.set_readiness_stream(capturing_));
  still_capturing("set_readiness_stream on a stateless owner");
  EXPECT_FALSE(fresh.set_deallocation_stream(capturing_));
  still_capturing("set_deallocation_stream on a stateless owner");
  cudaGraph_t graph = nullptr;
  HDL_ASSERT_CUDA(cudaStreamEndCapture(capturing_, &graph));
  ASSERT_NE(graph, nullptr);

  EXPECT_TRUE(buffer_->has_readiness_stream_contract());
  EXPECT_EQ(buffer_->readiness_stream(), other_);
  EXPECT_EQ(buffer_->deallocation_point_count(), 1u);
  EXPECT_FALSE(fresh.has_readiness_stream_contract());
  EXPECT_EQ(fresh.readiness_stream(), nullptr);
  EXPECT_EQ(fresh.deallocation_point_count(), 0u);

  // The graph is valid: it instantiates, runs and writes what it captured.
  cudaGraphExec_t exec = nullptr;
  HDL_ASSERT_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  HDL_ASSERT_CUDA(cudaGraphLaunch(exec, capturing_));
  HDL_ASSERT_CUDA(launch_check(data_, kElements, kSeed, 0, result.get(), capturing_));
  HDL_ASSERT_CUDA(cudaStreamSynchronize(capturing_));
  EXPECT_EQ(result.at(0).mismatches, 0u);
  HDL_EXPECT_CUDA(cudaGraphExecDestroy(exec));
  HDL_EXPECT_CUDA(cudaGraphDestroy(graph));
}

// A capture in global mode on `stream` (one kernel in it), begun and ended by a thread of its own
// (CUDA ends a global capture only on the thread that began it).
class GlobalCaptureOnAnotherThread {
 public:
  GlobalCaptureOnAnotherThread(int device, cudaStream_t stream, std::uint32_t* data) {
    std::future<void> go = go_.get_future();
    std::promise<void> begun;
    std::future<void> has_begun = begun.get_future();
    thread_ = std::thread(
        [this, device, stream, data, go = std::move(go), begun = std::move(begun)]() mutable {
          (void)cudaSetDevice(device);
          const cudaError_t began = cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal);
          if (began == cudaSuccess) {
            (void)launch_slow_fill(data, kElements, 1, 0, stream);
          }
          begun.set_value();
          go.wait();
          if (began != cudaSuccess) {
            ended_.set_value(began);
            return;
          }
          cudaGraph_t graph = nullptr;
          const cudaError_t status = cudaStreamEndCapture(stream, &graph);
          if (graph != nullptr) {
            (void)cudaGraphDestroy(graph);
          }
          ended_.set_value(status);
        });
    has_begun.wait();
  }
  GlobalCaptureOnAnotherThread(const GlobalCaptureOnAnotherThread&) = delete;
  GlobalCaptureOnAnotherThread& operator=(const GlobalCaptureOnAnotherThread&) = delete;
  ~GlobalCaptureOnAnotherThread() {
    if (thread_.joinable()) {
      (void)end();
    }
  }

  // Ends the capture: cudaSuccess when nothing invalidated it.
  cudaError_t end() {
    go_.set_value();
    const cudaError_t status = ended_.get_future().get();
    thread_.join();
    return status;
  }

 private:
  std::promise<void> go_;
  std::promise<cudaError_t> ended_;
  std::thread thread_;
};

// Host waits the caller asks for while another thread captures a graph in global mode: they
// succeed and leave that capture valid. What CUDA does with a raw wait of a thread in global mode
// then is printed after (the premise of the fake runtime's rule).
TEST_F(CaptureTest, HostWaitsNeverInvalidateAnotherThreadsGlobalCapture) {
  {
    GlobalCaptureOnAnotherThread capture(device_, capturing_, data_);
    HDL_EXPECT_CUDA(launch_slow_fill(data_, kElements, 2, 20'000, other_));
    ASSERT_TRUE(buffer_->set_readiness_stream(other_));
    const auto host_wait = buffer_->synchronize_for_host();
    EXPECT_TRUE(host_wait.has_value()) << host_wait.error().message;
    const auto stream_wait = synchronize_cuda_stream_for_host(other_);
    EXPECT_TRUE(stream_wait.has_value()) << stream_wait.error().message;
    EXPECT_EQ(capture.end(), cudaSuccess)
        << "the library's host waits invalidated another thread's capture";
  }
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  cudaEvent_t raw = nullptr;
  HDL_ASSERT_CUDA(cudaEventCreateWithFlags(&raw, cudaEventDisableTiming));
  HDL_ASSERT_CUDA(cudaEventRecord(raw, other_));
  GlobalCaptureOnAnotherThread capture(device_, capturing_, data_);
  const cudaError_t raw_wait = cudaEventSynchronize(raw);
  (void)cudaGetLastError();
  const cudaError_t end = capture.end();
  (void)cudaGetLastError();
  std::cout << "[ info ] a raw cudaEventSynchronize of a thread in global mode during another "
               "thread's global capture: "
            << cudaGetErrorName(raw_wait) << "; the capture then ended with "
            << cudaGetErrorName(end) << "\n";
  HDL_EXPECT_CUDA(cudaEventDestroy(raw));
}

// Memory the library frees on a caller's thread (a device pool destroyed with its blocks idle, a
// pinned-host copy dropped) is freed in relaxed mode: cudaFree and cudaFreeHost synchronize the
// device, which global mode refuses during another thread's global capture (the capture would be
// invalidated and the memory leaked).
TEST_F(CaptureTest, FreesOnTheCallersThreadNeverInvalidateAnotherThreadsGlobalCapture) {
  // What CUDA says of an address: a freed one is no allocation of any kind (cudaMemGetInfo would
  // count other processes' allocations too). Older drivers refuse such an address instead.
  const auto memory_type = [](const void* address) {
    cudaPointerAttributes attributes{};
    if (cudaPointerGetAttributes(&attributes, address) != cudaSuccess) {
      (void)cudaGetLastError();
      return cudaMemoryTypeUnregistered;
    }
    return attributes.type;
  };
  HDL_ASSERT_CUDA(cudaStreamSynchronize(other_));
  auto pool = TensorPool::create(TensorPoolConfig{PoolMemory::kDevice, device_, 1 << 20, 1});
  ASSERT_TRUE(pool.has_value()) << pool.error().message;
  auto source = (*pool)->allocate({16}, DLDataType{kDLFloat, 32, 1});
  ASSERT_TRUE(source.has_value()) << source.error().message;
  // Written first so that compute-sanitizer's initcheck sees the copy read defined memory.
  HDL_ASSERT_CUDA(cudaMemsetAsync(source->data(), 0, source->nbytes(), other_));
  auto copy = source->copy_to(DLDevice{kDLCUDAHost, 0}, other_);  // waits for the copy
  ASSERT_TRUE(copy.has_value()) << copy.error().message;
  const void* block = source->data();
  const void* pinned = copy->data();
  *source = Tensor();
  HDL_ASSERT_CUDA(cudaStreamSynchronize(other_));
  ASSERT_EQ((*pool)->available_blocks(), 1u);  // the block's points passed and are dropped
  ASSERT_EQ(memory_type(block), cudaMemoryTypeDevice);
  ASSERT_EQ(memory_type(pinned), cudaMemoryTypeHost);
  {
    GlobalCaptureOnAnotherThread capture(device_, capturing_, data_);
    *copy = Tensor();
    pool->reset();
    EXPECT_EQ(capture.end(), cudaSuccess) << "a free invalidated another thread's capture";
  }
  flush_deferred_releases();
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(memory_type(block), cudaMemoryTypeUnregistered) << "the pool's memory was never freed";
  EXPECT_EQ(memory_type(pinned), cudaMemoryTypeUnregistered) << "the copy's memory was never freed";
}

// The contract allows either outcome; this pins down that it is one of the two and says which.
TEST_F(CaptureTest, ConsumerWaitOnACapturingStreamIsOrderedOrAClearError) {
  constexpr std::uint32_t kSeed = 0x6EA9;
  DeviceArray<CheckResult> result(1);
  HDL_ASSERT_CUDA(launch_slow_fill(data_, kElements, kSeed, 50'000, other_));
  ASSERT_TRUE(buffer_->set_readiness_stream(other_));

  HDL_ASSERT_CUDA(cudaStreamBeginCapture(capturing_, cudaStreamCaptureModeThreadLocal));
  auto synced = buffer_->synchronize_for_consumer(capturing_);
  if (synced.has_value()) {
    HDL_EXPECT_CUDA(launch_check(data_, kElements, kSeed, 0, result.get(), capturing_));
    cudaGraph_t graph = nullptr;
    HDL_ASSERT_CUDA(cudaStreamEndCapture(capturing_, &graph));
    ASSERT_NE(graph, nullptr);
    cudaGraphExec_t exec = nullptr;
    HDL_ASSERT_CUDA(cudaGraphInstantiate(&exec, graph, 0));
    HDL_ASSERT_CUDA(cudaGraphLaunch(exec, capturing_));
    HDL_ASSERT_CUDA(cudaStreamSynchronize(capturing_));
    EXPECT_EQ(result.at(0).mismatches, 0u) << "the captured wait did not order the graph";
    EXPECT_EQ(result.at(0).checksum, expected_checksum(kSeed, kElements));
    HDL_EXPECT_CUDA(cudaGraphExecDestroy(exec));
    HDL_EXPECT_CUDA(cudaGraphDestroy(graph));
    std::cout << "[   INFO   ] synchronize_for_consumer on a capturing stream: captured ordering "
                 "(the graph waits on the readiness event)\n";
  } else {
    EXPECT_EQ(synced.error().code, ErrorCode::kFailure) << synced.error().message;
    EXPECT_NE(synced.error().message.find("cudaStreamWaitEvent"), std::string::npos)
        << synced.error().message;
    // Why the wait failed, not only that the capture is now invalid: the driver's own error.
    EXPECT_NE(synced.error().message.find("capturing a CUDA graph"), std::string::npos)
        << synced.error().message;
    EXPECT_EQ(synced.error().message.find("cudaErrorStreamCaptureInvalidated"), std::string::npos)
        << synced.error().message;
    cudaGraph_t graph = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(capturing_, &graph);
    if (graph != nullptr) {
      HDL_EXPECT_CUDA(cudaGraphDestroy(graph));
    }
    (void)cudaGetLastError();  // the invalidated capture's error is expected here
    EXPECT_EQ(capture_status(capturing_), cudaStreamCaptureStatusNone);
    std::cout << "[   INFO   ] synchronize_for_consumer on a capturing stream: Error "
              << error_code_name(synced.error().code) << " \"" << synced.error().message
              << "\"; cudaStreamEndCapture then returned " << cudaGetErrorName(ended) << "\n";
  }
}

}  // namespace
}  // namespace holoscan::test
