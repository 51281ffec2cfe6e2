#pragma once
// The table through which the cross-process code makes every CUDA call on shareable memory,
// interprocess events and its own streams: the seam where tests install a fake that simulates
// them across threads and forked processes. Internal: public headers never include CUDA headers.
//
// The runtime entries that also exist in cuda_api.hpp (event record, wait, query, ...) are here
// again on purpose: interprocess events and the release streams are the fake's own objects, so
// every call on them must reach the same fake. Driver entry points (VMM, pointer attributes, UUID)
// are resolved at run time through cudaGetDriverEntryPointByVersion, so nothing links libcuda.
#include <atomic>
#include <cstddef>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "holoscan/export.hpp"

namespace holoscan::detail {

/** @brief The CUDA entry points of the cross-process code, one pointer each. */
struct HOLOSCAN_DLPACK_ABI CudaIpcApi {
  /** @brief cudaEventCreateWithFlags (interprocess events). */
  cudaError_t (*event_create_with_flags)(cudaEvent_t* event, unsigned int flags);
  /** @brief cudaEventDestroy (interprocess and opened events). */
  cudaError_t (*event_destroy)(cudaEvent_t event);
  /** @brief cudaEventRecord of an interprocess event. */
  cudaError_t (*event_record)(cudaEvent_t event, cudaStream_t stream);
  /** @brief cudaEventQuery of an interprocess or opened event. */
  cudaError_t (*event_query)(cudaEvent_t event);
  /** @brief cudaEventSynchronize of an opened event. */
  cudaError_t (*event_synchronize)(cudaEvent_t event);
  /** @brief cudaStreamWaitEvent: a consumer on an opened event, a release stream on a point. */
  cudaError_t (*stream_wait_event)(cudaStream_t stream, cudaEvent_t event, unsigned int flags);
  /** @brief cudaStreamCreateWithFlags (the release streams). */
  cudaError_t (*stream_create_with_flags)(cudaStream_t* stream, unsigned int flags);
  /** @brief cudaStreamDestroy (the release streams). */
  cudaError_t (*stream_destroy)(cudaStream_t stream);
  /** @brief cudaIpcGetEventHandle. */
  cudaError_t (*ipc_get_event_handle)(cudaIpcEventHandle_t* handle, cudaEvent_t event);
  /** @brief cudaIpcOpenEventHandle. */
  cudaError_t (*ipc_open_event_handle)(cudaEvent_t* event, cudaIpcEventHandle_t handle);
  /** @brief cudaIpcGetMemHandle. */
  cudaError_t (*ipc_get_mem_handle)(cudaIpcMemHandle_t* handle, void* pointer);
  /** @brief cudaIpcOpenMemHandle. */
  cudaError_t (*ipc_open_mem_handle)(void** pointer, cudaIpcMemHandle_t handle, unsigned int flags);
  /** @brief cudaIpcCloseMemHandle. */
  cudaError_t (*ipc_close_mem_handle)(void* pointer);
  /** @brief cudaGetDeviceCount. */
  cudaError_t (*get_device_count)(int* count);

  /** @brief cuPointerGetAttributes. */
  CUresult (*pointer_get_attributes)(unsigned int count, CUpointer_attribute* attributes,
                                     void** data, CUdeviceptr pointer);
  /** @brief cuMemGetAddressRange. */
  CUresult (*mem_get_address_range)(CUdeviceptr* base, std::size_t* size, CUdeviceptr pointer);
  /** @brief cuMemRetainAllocationHandle. */
  CUresult (*mem_retain_allocation_handle)(CUmemGenericAllocationHandle* handle, void* address);
  /** @brief cuMemGetAllocationGranularity. */
  CUresult (*mem_get_allocation_granularity)(std::size_t* granularity,
                                             const CUmemAllocationProp* prop,
                                             CUmemAllocationGranularity_flags option);
  /** @brief cuMemCreate. */
  CUresult (*mem_create)(CUmemGenericAllocationHandle* handle, std::size_t size,
                         const CUmemAllocationProp* prop, unsigned long long flags);
  /** @brief cuMemRelease. */
  CUresult (*mem_release)(CUmemGenericAllocationHandle handle);
  /** @brief cuMemExportToShareableHandle. */
  CUresult (*mem_export_to_shareable_handle)(void* shareable, CUmemGenericAllocationHandle handle,
                                             CUmemAllocationHandleType type,
                                             unsigned long long flags);
  /** @brief cuMemImportFromShareableHandle. */
  CUresult (*mem_import_from_shareable_handle)(CUmemGenericAllocationHandle* handle,
                                               void* os_handle, CUmemAllocationHandleType type);
  /** @brief cuMemAddressReserve. */
  CUresult (*mem_address_reserve)(CUdeviceptr* pointer, std::size_t size, std::size_t alignment,
                                  CUdeviceptr address, unsigned long long flags);
  /** @brief cuMemAddressFree. */
  CUresult (*mem_address_free)(CUdeviceptr pointer, std::size_t size);
  /** @brief cuMemMap. */
  CUresult (*mem_map)(CUdeviceptr pointer, std::size_t size, std::size_t offset,
                      CUmemGenericAllocationHandle handle, unsigned long long flags);
  /** @brief cuMemUnmap. */
  CUresult (*mem_unmap)(CUdeviceptr pointer, std::size_t size);
  /** @brief cuMemSetAccess. */
  CUresult (*mem_set_access)(CUdeviceptr pointer, std::size_t size, const CUmemAccessDesc* desc,
                             std::size_t count);
  /** @brief cuDeviceGet of runtime ordinal `device`, then cuDeviceGetUuid. */
  CUresult (*device_get_uuid)(CUuuid* uuid, int device);
  /** @brief cuGetErrorName. */
  CUresult (*get_error_name)(CUresult status, const char** name);
  /** @brief cuGetErrorString. */
  CUresult (*get_error_string)(CUresult status, const char** text);
};

/** @brief The table of the real CUDA runtime and driver (the default). */
const CudaIpcApi& real_cuda_ipc_api() noexcept;

/** @brief The table in use; see cuda_ipc(). */
extern std::atomic<const CudaIpcApi*> g_cuda_ipc_api;

/** @brief The table in use (one relaxed load: tables are immutable and live for the process). */
inline const CudaIpcApi& cuda_ipc() noexcept {
  return *g_cuda_ipc_api.load(std::memory_order_relaxed);
}

/**
 * @brief Makes `api` the table in use (null: the real one) and returns the previous one.
 *
 * For tests. Interprocess events and release streams made under one table are handles of that
 * table: give them back (destroy_free_ipc_events(), reset_release_streams()) before switching.
 */
const CudaIpcApi* install_cuda_ipc_api(const CudaIpcApi* api) noexcept;

}  // namespace holoscan::detail
