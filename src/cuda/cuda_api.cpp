#include "cuda/cuda_api.hpp"

#include "cuda/cuda_driver_fast_path.hpp"

namespace holoscan::detail {
namespace {

// Address constants only, so the table is constant-initialized: it is usable from any static
// initializer or atexit handler, before or after this file's dynamic initialization.
// The hot entries take the driver's cheaper path where it means the same (see
// cuda_driver_fast_path.cpp); their answers are the runtime's.
const CudaApi kRealCudaApi = {
    &fast::event_record,
    &fast::stream_wait_event,
    &fast::event_query,
    &cudaEventSynchronize,
    &cudaEventCreateWithFlags,
    &cudaEventDestroy,
    &cudaGetDevice,
    &cudaSetDevice,
    &fast::stream_get_device,
    &fast::stream_is_capturing,
    &cudaThreadExchangeStreamCaptureMode,
    &cudaMalloc,
    &cudaFree,
    &cudaGetLastError,
    &cudaGetErrorName,
    &cudaGetErrorString,
    &cudaStreamSynchronize,
    &cudaPointerGetAttributes,
    &fast::stream_get_id,
    &cudaStreamCreateWithFlags,
    &cudaMallocAsync,
    &cudaFreeAsync,
    &cudaMallocHost,
    &cudaFreeHost,
    &cudaMallocManaged,
    &cudaMemcpyAsync,
    &cudaMemcpy2DAsync,
};

}  // namespace

std::atomic<const CudaApi*> g_cuda_api{&kRealCudaApi};

const CudaApi& real_cuda_api() noexcept { return kRealCudaApi; }

const CudaApi* install_cuda_api(const CudaApi* api) noexcept {
  return g_cuda_api.exchange(api != nullptr ? api : &kRealCudaApi, std::memory_order_acq_rel);
}

}  // namespace holoscan::detail
