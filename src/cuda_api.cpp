#include "cuda_api.hpp"

namespace holoscan::detail {
namespace {

// Address constants only, so the table is constant-initialized: it is usable from any static
// initializer or atexit handler, before or after this file's dynamic initialization.
const CudaApi kRealCudaApi = {
    &cudaEventRecord,
    &cudaStreamWaitEvent,
    &cudaEventQuery,
    &cudaEventSynchronize,
    &cudaEventCreateWithFlags,
    &cudaEventDestroy,
    &cudaGetDevice,
    &cudaSetDevice,
    &cudaStreamGetDevice,
    &cudaStreamIsCapturing,
    &cudaThreadExchangeStreamCaptureMode,
    &cudaMalloc,
    &cudaFree,
    &cudaGetLastError,
    &cudaGetErrorName,
    &cudaGetErrorString,
    &cudaStreamSynchronize,
    &cudaPointerGetAttributes,
    &cudaStreamGetId,
};

}  // namespace

std::atomic<const CudaApi*> g_cuda_api{&kRealCudaApi};

const CudaApi& real_cuda_api() noexcept { return kRealCudaApi; }

const CudaApi* install_cuda_api(const CudaApi* api) noexcept {
  return g_cuda_api.exchange(api != nullptr ? api : &kRealCudaApi, std::memory_order_acq_rel);
}

}  // namespace holoscan::detail
