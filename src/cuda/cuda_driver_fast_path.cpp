#include "cuda/cuda_driver_fast_path.hpp"

#include <cuda.h>

#include <atomic>
#include <new>
#include <type_traits>

namespace holoscan::detail::fast {
namespace {

// Why the driver: measured on the H200 (benchmarks/cuda_probe_benchmark.cpp), the runtime adds
// 40-80 ns to each of these calls (cudaStreamIsCapturing 70 ns against cuStreamIsCapturing 21,
// cudaEventRecord 226-296 against cuEventRecord 182). The handles are the same objects
// (cudaStream_t is CUstream, cudaEvent_t is CUevent), and explicit streams carry their own
// context, so no current context is needed. Default-stream handles (null, legacy, per-thread)
// mean "of the runtime's current device", which only the runtime resolves: they go to it.
//
// Error handling: a CUDA call that fails has no effect, so when a driver call fails the runtime
// call is made instead and its answer (success, or the runtime's own error code and name) is the
// one returned. The driver path therefore never changes what a caller sees, only what it costs.
// The exception is a stream-capture error: the failed driver call has already invalidated the
// caller's capture, and the runtime's call would only report that
// (cudaErrorStreamCaptureInvalidated), hiding why. Those codes, equal in both APIs, are returned
// as the driver gave them.
struct Driver {
  decltype(&::cuEventRecord) event_record = nullptr;
  decltype(&::cuStreamWaitEvent) stream_wait_event = nullptr;
  decltype(&::cuEventQuery) event_query = nullptr;
  decltype(&::cuStreamIsCapturing) stream_is_capturing = nullptr;
  decltype(&::cuStreamGetDevice) stream_get_device = nullptr;
  decltype(&::cuStreamGetId) stream_get_id = nullptr;
};

template <class Function>
void load(const char* name, Function& slot) {
  void* function = nullptr;
  cudaDriverEntryPointQueryResult found{};
  // 12080: the first version with cuStreamGetDevice; each entry keeps that ABI.
  if (cudaGetDriverEntryPointByVersion(name, &function, 12080, cudaEnableDefault, &found) ==
          cudaSuccess &&
      found == cudaDriverEntryPointSuccess) {
    slot = reinterpret_cast<Function>(function);
  } else {
    (void)cudaGetLastError();
  }
}

// A CUdevice is a handle that equals the runtime's ordinal on every driver seen; the stream's
// device is only taken from the driver when that holds for every device of this process.
bool driver_devices_are_ordinals() {
  decltype(&::cuDeviceGet) device_get = nullptr;
  load("cuDeviceGet", device_get);
  int count = 0;
  if (device_get == nullptr || cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    CUdevice device = -1;
    if (device_get(&device, ordinal) != CUDA_SUCCESS || device != ordinal) {
      return false;
    }
  }
  return true;
}

Driver resolve() {
  Driver entries;
  load("cuEventRecord", entries.event_record);
  load("cuStreamWaitEvent", entries.stream_wait_event);
  load("cuEventQuery", entries.event_query);
  load("cuStreamIsCapturing", entries.stream_is_capturing);
  load("cuStreamGetId", entries.stream_get_id);
  if (driver_devices_are_ordinals()) {
    load("cuStreamGetDevice", entries.stream_get_device);
  }
  return entries;
}

// No entry at all: every call goes to the runtime (constant-initialized).
const Driver kRuntimeOnly{};
// The entries once resolved (constant-initialized, never freed). Not a function-local static: a
// fork() while another thread resolved them would copy its one-time guard taken, and the child's
// first hook would wait for it for ever instead of failing as CUDA does in a child. Threads that
// race resolve them each (the lookups are idempotent) and the first to publish wins; a child
// forked meanwhile finds none published and resolves them itself.
std::atomic<const Driver*> resolved{nullptr};

const Driver& driver() {
  if (const Driver* entries = resolved.load(std::memory_order_acquire); entries != nullptr) {
    return *entries;
  }
  const Driver* made = new (std::nothrow) Driver(resolve());
  if (made == nullptr) {
    return kRuntimeOnly;  // out of host memory: the runtime's calls, asked again next time
  }
  const Driver* published = nullptr;
  if (!resolved.compare_exchange_strong(published, made, std::memory_order_acq_rel)) {
    delete made;
    return *published;
  }
  return *made;
}

bool explicit_stream(cudaStream_t stream) {
  return stream != nullptr && stream != cudaStreamLegacy && stream != cudaStreamPerThread;
}

static_assert(std::is_same_v<cudaStream_t, CUstream> && std::is_same_v<cudaEvent_t, CUevent>);
static_assert(static_cast<int>(CU_STREAM_CAPTURE_STATUS_NONE) == cudaStreamCaptureStatusNone &&
              static_cast<int>(CU_STREAM_CAPTURE_STATUS_ACTIVE) == cudaStreamCaptureStatusActive &&
              static_cast<int>(CU_STREAM_CAPTURE_STATUS_INVALIDATED) ==
                  cudaStreamCaptureStatusInvalidated);

// Whether `result` is a stream-capture error (see "Error handling" above).
bool is_capture_error(CUresult result) {
  return result >= CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED &&
         result <= CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
}

static_assert(
    static_cast<int>(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED) == cudaErrorStreamCaptureUnsupported &&
    static_cast<int>(CUDA_ERROR_STREAM_CAPTURE_ISOLATION) == cudaErrorStreamCaptureIsolation &&
    static_cast<int>(CUDA_ERROR_CAPTURED_EVENT) == cudaErrorCapturedEvent &&
    static_cast<int>(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD) == cudaErrorStreamCaptureWrongThread &&
    CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD - CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED ==
        cudaErrorStreamCaptureWrongThread - cudaErrorStreamCaptureUnsupported);

// The driver's answer where it is final (success, or a capture error), else the runtime's.
template <class RuntimeCall>
cudaError_t driver_or_runtime(CUresult result, RuntimeCall&& runtime_call) {
  if (result == CUDA_SUCCESS) {
    return cudaSuccess;
  }
  if (is_capture_error(result)) {
    return static_cast<cudaError_t>(result);
  }
  return runtime_call();
}

}  // namespace

cudaError_t event_record(cudaEvent_t event, cudaStream_t stream) {
  const auto runtime_call = [&] { return cudaEventRecord(event, stream); };
  if (const auto call = driver().event_record; call != nullptr && explicit_stream(stream)) {
    return driver_or_runtime(call(event, stream), runtime_call);
  }
  return runtime_call();
}

cudaError_t stream_wait_event(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
  const auto runtime_call = [&] { return cudaStreamWaitEvent(stream, event, flags); };
  if (const auto call = driver().stream_wait_event;
      call != nullptr && flags == 0 && explicit_stream(stream)) {
    return driver_or_runtime(call(stream, event, 0), runtime_call);
  }
  return runtime_call();
}

cudaError_t event_query(cudaEvent_t event) {
  const auto runtime_call = [&] { return cudaEventQuery(event); };
  if (const auto call = driver().event_query; call != nullptr) {
    const CUresult result = call(event);
    return result == CUDA_ERROR_NOT_READY ? cudaErrorNotReady
                                          : driver_or_runtime(result, runtime_call);
  }
  return runtime_call();
}

cudaError_t stream_is_capturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  const auto runtime_call = [&] { return cudaStreamIsCapturing(stream, status); };
  if (const auto call = driver().stream_is_capturing; call != nullptr && explicit_stream(stream)) {
    CUstreamCaptureStatus captured = CU_STREAM_CAPTURE_STATUS_NONE;
    const CUresult result = call(stream, &captured);
    if (result == CUDA_SUCCESS) {
      *status = static_cast<cudaStreamCaptureStatus>(captured);
    }
    return driver_or_runtime(result, runtime_call);
  }
  return runtime_call();
}

cudaError_t stream_get_device(cudaStream_t stream, int* device) {
  const auto runtime_call = [&] { return cudaStreamGetDevice(stream, device); };
  if (const auto call = driver().stream_get_device; call != nullptr && explicit_stream(stream)) {
    CUdevice found = -1;
    const CUresult result = call(stream, &found);
    if (result == CUDA_SUCCESS) {
      *device = found;
    }
    return driver_or_runtime(result, runtime_call);
  }
  return runtime_call();
}

cudaError_t stream_get_id(cudaStream_t stream, unsigned long long* id) {
  const auto runtime_call = [&] { return cudaStreamGetId(stream, id); };
  if (const auto call = driver().stream_get_id; call != nullptr && explicit_stream(stream)) {
    return driver_or_runtime(call(stream, id), runtime_call);
  }
  return runtime_call();
}

}  // namespace holoscan::detail::fast
