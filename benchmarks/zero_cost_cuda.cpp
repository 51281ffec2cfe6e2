#include "zero_cost_cuda.hpp"

#include <array>
#include <atomic>
#include <cstdint>

#include <holoscan/deferred_release.hpp>

#include "stream/pooled_events.hpp"

namespace holoscan_bench {
namespace {

// Handles are addresses in these arrays: distinct, stable, never dereferenced by the library.
std::array<char, 64> stream_handles{};
std::atomic<std::uintptr_t> events_made{0};

cudaError_t ok_event(cudaEvent_t) { return cudaSuccess; }
cudaError_t ok_event_stream(cudaEvent_t, cudaStream_t) { return cudaSuccess; }
cudaError_t ok_wait(cudaStream_t, cudaEvent_t, unsigned int) { return cudaSuccess; }
cudaError_t create_event(cudaEvent_t* event, unsigned int) {
  // Odd numbers past 4096 name no object, nor any of CUDA's special stream handles.
  *event = reinterpret_cast<cudaEvent_t>(4097 + 2 * events_made.fetch_add(1));
  return cudaSuccess;
}
cudaError_t device_zero(int* device) {
  *device = 0;
  return cudaSuccess;
}
cudaError_t set_device(int) { return cudaSuccess; }
cudaError_t stream_device(cudaStream_t, int* device) { return device_zero(device); }
cudaError_t not_capturing(cudaStream_t, cudaStreamCaptureStatus* status) {
  *status = cudaStreamCaptureStatusNone;
  return cudaSuccess;
}
cudaError_t capture_mode(cudaStreamCaptureMode*) { return cudaSuccess; }
cudaError_t stream_id(cudaStream_t stream, unsigned long long* id) {
  *id = reinterpret_cast<std::uintptr_t>(stream);
  return cudaSuccess;
}
cudaError_t success() { return cudaSuccess; }
const char* no_name(cudaError_t) { return "cudaSuccess"; }
cudaError_t unsupported_memory(void**, std::size_t) { return cudaErrorNotSupported; }
cudaError_t ok_free(void*) { return cudaSuccess; }
cudaError_t ok_stream(cudaStream_t) { return cudaSuccess; }
cudaError_t no_attributes(cudaPointerAttributes*, const void*) { return cudaErrorInvalidValue; }
cudaError_t no_stream(cudaStream_t*, unsigned int) { return cudaErrorNotSupported; }
cudaError_t unsupported_async(void**, std::size_t, cudaStream_t) { return cudaErrorNotSupported; }
cudaError_t ok_free_async(void*, cudaStream_t) { return cudaSuccess; }
cudaError_t unsupported_managed(void**, std::size_t, unsigned int) {
  return cudaErrorNotSupported;
}
cudaError_t unsupported_copy(void*, const void*, std::size_t, cudaMemcpyKind, cudaStream_t) {
  return cudaErrorNotSupported;
}
cudaError_t unsupported_copy_2d(void*, std::size_t, const void*, std::size_t, std::size_t,
                                std::size_t, cudaMemcpyKind, cudaStream_t) {
  return cudaErrorNotSupported;
}

const holoscan::detail::CudaApi kZeroCost = {
    ok_event_stream,  ok_wait,          ok_event,         ok_event,
    create_event,     ok_event,         device_zero,      set_device,
    stream_device,    not_capturing,    capture_mode,     unsupported_memory,
    ok_free,          success,          no_name,          no_name,
    ok_stream,        no_attributes,    stream_id,        no_stream,
    unsupported_async, ok_free_async,   unsupported_memory, ok_free,
    unsupported_managed, unsupported_copy, unsupported_copy_2d,
};

}  // namespace

ZeroCostCudaScope::ZeroCostCudaScope() {
  holoscan::flush_deferred_releases();
  (void)holoscan::detail::destroy_free_events();
  previous_ = holoscan::detail::install_cuda_api(&kZeroCost);
}

ZeroCostCudaScope::~ZeroCostCudaScope() {
  holoscan::flush_deferred_releases();
  (void)holoscan::detail::destroy_free_events();
  (void)holoscan::detail::install_cuda_api(previous_);
}

cudaStream_t ZeroCostCudaScope::stream(int index) noexcept {
  return reinterpret_cast<cudaStream_t>(&stream_handles[static_cast<std::size_t>(index)]);
}

}  // namespace holoscan_bench
