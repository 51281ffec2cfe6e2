// The GPU fixture and the device-memory DLPack producers shared by every GPU test.
#include "gpu/gpu_test_fixture.hpp"

#include <holoscan/deferred_release.hpp>
#include <utility>

#include "support/cuda_availability.hpp"

namespace holoscan::test {

void DeleterProbe::watch(std::vector<cudaStream_t> streams) {
  std::lock_guard<std::mutex> lock(mutex_);
  watched_ = std::move(streams);
}

std::vector<cudaError_t> DeleterProbe::stream_status_at_delete() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return status_at_delete_;
}

void DeleterProbe::on_delete() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    status_at_delete_.clear();
    for (cudaStream_t stream : watched_) {
      const cudaError_t status = cudaStreamQuery(stream);
      if (status == cudaErrorNotReady) {
        (void)cudaGetLastError();
      }
      status_at_delete_.push_back(status);
    }
  }
  // Counted last (release), so a reader that sees the count also sees the recorded states.
  calls_.fetch_add(1, std::memory_order_acq_rel);
}

namespace {

// One record behind manager_ctx owns the shape and describes the memory, for both layouts.
struct DeviceTensorRecord {
  DeviceTensorSpec spec;
  std::int64_t shape[1] = {0};
  DLManagedTensorVersioned versioned{};
  DLManagedTensor legacy{};
};

DLTensor describe(DeviceTensorRecord& record) {
  DLTensor dl{};
  dl.data = record.spec.data;
  dl.device = DLDevice{kDLCUDA, record.spec.device};
  dl.ndim = 1;
  dl.dtype = DLDataType{kDLUInt, 32, 1};
  dl.shape = record.shape;
  dl.strides = nullptr;
  dl.byte_offset = 0;
  return dl;
}

// Probe first: it must see the streams as they were when the library decided to release; the
// cudaFree after it synchronizes the device and would hide an early call.
void finish(DeviceTensorRecord* record) {
  if (record->spec.probe != nullptr) {
    record->spec.probe->on_delete();
  }
  if (record->spec.free_data && record->spec.data != nullptr) {
    int previous = 0;
    if (cudaGetDevice(&previous) == cudaSuccess &&
        cudaSetDevice(record->spec.device) == cudaSuccess) {
      (void)cudaFree(record->spec.data);
      (void)cudaSetDevice(previous);
    }
    (void)cudaGetLastError();  // a deleter may run on a library thread; leave it clean
  }
  delete record;
}

void delete_versioned(DLManagedTensorVersioned* self) {
  finish(static_cast<DeviceTensorRecord*>(self->manager_ctx));
}

void delete_legacy(DLManagedTensor* self) {
  finish(static_cast<DeviceTensorRecord*>(self->manager_ctx));
}

}  // namespace

DLManagedTensorVersioned* make_versioned_device_tensor(const DeviceTensorSpec& spec) {
  auto* record = new DeviceTensorRecord{};
  record->spec = spec;
  record->shape[0] = spec.elements;
  record->versioned.version = DLPackVersion{DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
  record->versioned.manager_ctx = record;
  record->versioned.deleter = &delete_versioned;
  record->versioned.flags = 0;
  record->versioned.dl_tensor = describe(*record);
  return &record->versioned;
}

DLManagedTensor* make_legacy_device_tensor(const DeviceTensorSpec& spec) {
  auto* record = new DeviceTensorRecord{};
  record->spec = spec;
  record->shape[0] = spec.elements;
  record->legacy.manager_ctx = record;
  record->legacy.deleter = &delete_legacy;
  record->legacy.dl_tensor = describe(*record);
  return &record->legacy;
}

std::uint32_t* device_alloc_zeroed(std::int64_t elements) {
  void* p = nullptr;
  const std::size_t bytes = static_cast<std::size_t>(elements) * sizeof(std::uint32_t);
  if (cudaMalloc(&p, bytes) != cudaSuccess) {
    return nullptr;
  }
  if (cudaMemset(p, 0, bytes) != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess) {
    (void)cudaFree(p);
    return nullptr;
  }
  return static_cast<std::uint32_t*>(p);
}

cudaError_t query_stream(cudaStream_t stream) {
  EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess) << "a CUDA error was left before this query";
  const cudaError_t status = cudaStreamQuery(stream);
  if (status == cudaErrorNotReady) {
    (void)cudaGetLastError();
  }
  return status;
}

void GpuTest::SetUp() {
  if (!cuda_device_available()) {
    GTEST_SKIP() << cuda_unavailable_reason();
  }
  active_ = true;
  ASSERT_EQ(cudaGetDeviceCount(&device_count_), cudaSuccess);
  ASSERT_EQ(cudaGetDevice(&original_device_), cudaSuccess);
  // With lazy module loading, a kernel's first launch in the process can wait for the whole
  // device, which would make one stream look ordered after another.
  ASSERT_EQ(load_all_kernels(), 0);
  (void)cudaGetLastError();  // each test starts clean; the previous TearDown already checked
}

void GpuTest::TearDown() {
  if (!active_) {
    return;
  }
  // Finish all GPU work first so that every deferred release can complete, then run them while
  // the streams they watch still exist.
  for (int device = 0; device < device_count_; ++device) {
    EXPECT_EQ(cudaSetDevice(device), cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess) << "device " << device;
  }
  flush_deferred_releases();
  EXPECT_EQ(pending_deferred_releases(), 0u);
  for (const auto& [device, stream] : streams_) {
    EXPECT_EQ(cudaSetDevice(device), cudaSuccess);
    EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  }
  streams_.clear();
  EXPECT_EQ(cudaSetDevice(original_device_), cudaSuccess);
  const cudaError_t last = cudaGetLastError();
  EXPECT_EQ(last, cudaSuccess) << "CUDA error left pending: " << cudaGetErrorName(last);
}

cudaStream_t GpuTest::make_stream(int device) {
  int previous = 0;
  EXPECT_EQ(cudaGetDevice(&previous), cudaSuccess);
  const int target = device < 0 ? previous : device;
  cudaStream_t stream = nullptr;
  EXPECT_EQ(cudaSetDevice(target), cudaSuccess);
  EXPECT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  EXPECT_EQ(cudaSetDevice(previous), cudaSuccess);
  if (stream != nullptr) {
    streams_.emplace_back(target, stream);
  }
  return stream;
}

bool GpuTest::streams_run_concurrently() {
  static const bool concurrent = [] {
    cudaStream_t busy = nullptr;
    cudaStream_t other = nullptr;
    if (cudaStreamCreateWithFlags(&busy, cudaStreamNonBlocking) != cudaSuccess ||
        cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking) != cudaSuccess) {
      return false;
    }
    // A 50 ms spin on one stream; a trivial kernel on the other that finishes first only when
    // the two can run at the same time.
    bool overlap = launch_spin(50'000, busy) == 0 && launch_spin(0, other) == 0 &&
                   cudaStreamSynchronize(other) == cudaSuccess &&
                   cudaStreamQuery(busy) == cudaErrorNotReady;
    (void)cudaGetLastError();
    overlap = cudaStreamSynchronize(busy) == cudaSuccess && overlap;
    (void)cudaStreamDestroy(busy);
    (void)cudaStreamDestroy(other);
    return overlap;
  }();
  return concurrent;
}

}  // namespace holoscan::test
