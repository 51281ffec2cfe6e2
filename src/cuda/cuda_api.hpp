#pragma once
// The one table through which the library makes every CUDA runtime call: the seam where tests
// install a fake runtime or inject faults. Internal: public headers never include CUDA headers.
#include <atomic>
#include <cstddef>

#include <cuda_runtime_api.h>

// A null stream is the legacy default stream here (CONTRACT 4, docs/streams.md): built with the
// per-thread default stream, the runtime would read it as each calling thread's own stream, which
// the stream bookkeeping would take for one stream (a point of one thread's replaced by another's).
#if defined(__CUDART_API_PER_THREAD_DEFAULT_STREAM)
#error "build holoscan-dlpack without CUDA_API_PER_THREAD_DEFAULT_STREAM (--default-stream per-thread)"
#endif

#include "holoscan/export.hpp"
#include "wing_api.hpp"

namespace holoscan::detail {

/** @brief The CUDA runtime entry points the library uses, one pointer each. */
struct HOLOSCAN_DLPACK_ABI CudaApi {
  /** @brief cudaEventRecord. */
  cudaError_t (*event_record)(cudaEvent_t event, cudaStream_t stream);
  /** @brief cudaStreamWaitEvent. */
  cudaError_t (*stream_wait_event)(cudaStream_t stream, cudaEvent_t event, unsigned int flags);
  /** @brief cudaEventQuery. */
  cudaError_t (*event_query)(cudaEvent_t event);
  /** @brief cudaEventSynchronize. */
  cudaError_t (*event_synchronize)(cudaEvent_t event);
  /** @brief cudaEventCreateWithFlags. */
  cudaError_t (*event_create_with_flags)(cudaEvent_t* event, unsigned int flags);
  /** @brief cudaEventDestroy. */
  cudaError_t (*event_destroy)(cudaEvent_t event);
  /** @brief cudaGetDevice. */
  cudaError_t (*get_device)(int* device);
  /** @brief cudaSetDevice. */
  cudaError_t (*set_device)(int device);
  /** @brief cudaStreamGetDevice. */
  cudaError_t (*stream_get_device)(cudaStream_t stream, int* device);
  /** @brief cudaStreamIsCapturing. */
  cudaError_t (*stream_is_capturing)(cudaStream_t stream, cudaStreamCaptureStatus* status);
  /** @brief cudaThreadExchangeStreamCaptureMode. */
  cudaError_t (*thread_exchange_stream_capture_mode)(cudaStreamCaptureMode* mode);
  /** @brief cudaMalloc. */
  cudaError_t (*malloc)(void** memory, std::size_t bytes);
  /** @brief cudaFree. */
  cudaError_t (*free)(void* memory);
  /** @brief cudaGetLastError. */
  cudaError_t (*get_last_error)();
  /** @brief cudaGetErrorName. */
  const char* (*get_error_name)(cudaError_t status);
  /** @brief cudaGetErrorString. */
  const char* (*get_error_string)(cudaError_t status);
  /** @brief cudaStreamSynchronize. */
  cudaError_t (*stream_synchronize)(cudaStream_t stream);
  /** @brief cudaPointerGetAttributes. */
  cudaError_t (*pointer_get_attributes)(cudaPointerAttributes* attributes, const void* pointer);
  /** @brief cudaStreamGetId. */
  cudaError_t (*stream_get_id)(cudaStream_t stream, unsigned long long* id);
  /** @brief cudaStreamCreateWithFlags. */
  cudaError_t (*stream_create_with_flags)(cudaStream_t* stream, unsigned int flags);
  /** @brief cudaMallocAsync (stream-ordered, from the stream's device's default pool). */
  cudaError_t (*malloc_async)(void** memory, std::size_t bytes, cudaStream_t stream);
  /** @brief cudaFreeAsync. */
  cudaError_t (*free_async)(void* memory, cudaStream_t stream);
  /** @brief cudaMallocHost (page-locked host memory). */
  cudaError_t (*malloc_host)(void** memory, std::size_t bytes);
  /** @brief cudaFreeHost. */
  cudaError_t (*free_host)(void* memory);
  /** @brief cudaMallocManaged. */
  cudaError_t (*malloc_managed)(void** memory, std::size_t bytes, unsigned int flags);
  /** @brief cudaMemcpyAsync. */
  cudaError_t (*memcpy_async)(void* destination, const void* source, std::size_t bytes,
                              cudaMemcpyKind kind, cudaStream_t stream);
  /** @brief cudaMemcpy2DAsync. */
  cudaError_t (*memcpy_2d_async)(void* destination, std::size_t destination_pitch,
                                 const void* source, std::size_t source_pitch, std::size_t width,
                                 std::size_t height, cudaMemcpyKind kind, cudaStream_t stream);
};

/** @brief The table of the real CUDA runtime (the default). */
HOLOSCAN_DLPACK_WING_API const CudaApi& real_cuda_api() noexcept;

/** @brief The table in use; see cuda(). */
HOLOSCAN_DLPACK_WING_API extern std::atomic<const CudaApi*> g_cuda_api;

/**
 * @brief The table in use: one relaxed load, then one indirect call per CUDA call.
 *
 * Relaxed is enough because every table is an immutable object that lives for the whole process
 * (the real one is constant-initialized, a test's fake is static): whichever pointer a thread
 * reads, everything it points to was complete before any thread could see it. A call racing with
 * an install may still go to the previous table, which stays valid; tests install theirs while
 * no library call is in flight.
 */
inline const CudaApi& cuda() noexcept { return *g_cuda_api.load(std::memory_order_relaxed); }

/**
 * @brief Makes `api` the table in use (null: the real runtime) and returns the previous one.
 *
 * For tests. `api` must outlive every call made through it. Events pooled under one table are
 * handles of that table: destroy them (destroy_free_events()) before switching back.
 */
const CudaApi* install_cuda_api(const CudaApi* api) noexcept;

}  // namespace holoscan::detail
