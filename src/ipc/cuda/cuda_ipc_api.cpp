#include "ipc/cuda/cuda_ipc_api.hpp"

#include <cudaTypedefs.h>

namespace holoscan::detail {
namespace {

// Driver entry points, resolved once on first use. Each is asked for by the CUDA version whose
// signature its PFN typedef names, so a newer driver hands out that same ABI.
struct DriverEntryPoints {
  PFN_cuPointerGetAttributes_v7000 pointer_get_attributes = nullptr;
  PFN_cuMemGetAddressRange_v3020 mem_get_address_range = nullptr;
  PFN_cuMemRetainAllocationHandle_v11000 mem_retain_allocation_handle = nullptr;
  PFN_cuMemGetAllocationGranularity_v10020 mem_get_allocation_granularity = nullptr;
  PFN_cuMemCreate_v10020 mem_create = nullptr;
  PFN_cuMemRelease_v10020 mem_release = nullptr;
  PFN_cuMemExportToShareableHandle_v10020 mem_export_to_shareable_handle = nullptr;
  PFN_cuMemImportFromShareableHandle_v10020 mem_import_from_shareable_handle = nullptr;
  PFN_cuMemAddressReserve_v10020 mem_address_reserve = nullptr;
  PFN_cuMemAddressFree_v10020 mem_address_free = nullptr;
  PFN_cuMemMap_v10020 mem_map = nullptr;
  PFN_cuMemUnmap_v10020 mem_unmap = nullptr;
  PFN_cuMemSetAccess_v10020 mem_set_access = nullptr;
  PFN_cuDeviceGet_v2000 device_get = nullptr;
  PFN_cuDeviceGetUuid_v11040 device_get_uuid = nullptr;
  PFN_cuGetErrorName_v6000 get_error_name = nullptr;
  PFN_cuGetErrorString_v6000 get_error_string = nullptr;
  cudaError_t failure = cudaSuccess;  // why an entry point is missing, when one is
};

template <class Function>
void resolve(DriverEntryPoints& table, Function& entry, const char* symbol, unsigned int version) {
  void* address = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  const cudaError_t status =
      cudaGetDriverEntryPointByVersion(symbol, &address, version, cudaEnableDefault, &found);
  if (status == cudaSuccess && found == cudaDriverEntryPointSuccess) {
    entry = reinterpret_cast<Function>(address);
    return;
  }
  (void)cudaGetLastError();
  if (table.failure == cudaSuccess) {
    table.failure = status != cudaSuccess ? status : cudaErrorSymbolNotFound;
  }
}

const DriverEntryPoints& driver() noexcept {
  static const DriverEntryPoints table = [] {
    DriverEntryPoints t;
    resolve(t, t.pointer_get_attributes, "cuPointerGetAttributes", 7000);
    resolve(t, t.mem_get_address_range, "cuMemGetAddressRange", 3020);
    resolve(t, t.mem_retain_allocation_handle, "cuMemRetainAllocationHandle", 11000);
    resolve(t, t.mem_get_allocation_granularity, "cuMemGetAllocationGranularity", 10020);
    resolve(t, t.mem_create, "cuMemCreate", 10020);
    resolve(t, t.mem_release, "cuMemRelease", 10020);
    resolve(t, t.mem_export_to_shareable_handle, "cuMemExportToShareableHandle", 10020);
    resolve(t, t.mem_import_from_shareable_handle, "cuMemImportFromShareableHandle", 10020);
    resolve(t, t.mem_address_reserve, "cuMemAddressReserve", 10020);
    resolve(t, t.mem_address_free, "cuMemAddressFree", 10020);
    resolve(t, t.mem_map, "cuMemMap", 10020);
    resolve(t, t.mem_unmap, "cuMemUnmap", 10020);
    resolve(t, t.mem_set_access, "cuMemSetAccess", 10020);
    resolve(t, t.device_get, "cuDeviceGet", 2000);
    resolve(t, t.device_get_uuid, "cuDeviceGetUuid", 11040);
    resolve(t, t.get_error_name, "cuGetErrorName", 6000);
    resolve(t, t.get_error_string, "cuGetErrorString", 6000);
    return t;
  }();
  return table;
}

// What a call through a missing entry point returns: "named symbol not found" is the driver's own
// word for it, and get_error_string below says why it is missing.
constexpr CUresult kMissing = CUDA_ERROR_NOT_FOUND;

template <class Function, class... Args>
CUresult call(Function entry, Args... args) noexcept {
  return entry != nullptr ? entry(args...) : kMissing;
}

CUresult pointer_get_attributes(unsigned int count, CUpointer_attribute* attributes, void** data,
                                CUdeviceptr pointer) {
  return call(driver().pointer_get_attributes, count, attributes, data, pointer);
}
CUresult mem_get_address_range(CUdeviceptr* base, std::size_t* size, CUdeviceptr pointer) {
  return call(driver().mem_get_address_range, base, size, pointer);
}
CUresult mem_retain_allocation_handle(CUmemGenericAllocationHandle* handle, void* address) {
  return call(driver().mem_retain_allocation_handle, handle, address);
}
CUresult mem_get_allocation_granularity(std::size_t* granularity, const CUmemAllocationProp* prop,
                                        CUmemAllocationGranularity_flags option) {
  return call(driver().mem_get_allocation_granularity, granularity, prop, option);
}
CUresult mem_create(CUmemGenericAllocationHandle* handle, std::size_t size,
                    const CUmemAllocationProp* prop, unsigned long long flags) {
  return call(driver().mem_create, handle, size, prop, flags);
}
CUresult mem_release(CUmemGenericAllocationHandle handle) {
  return call(driver().mem_release, handle);
}
CUresult mem_export_to_shareable_handle(void* shareable, CUmemGenericAllocationHandle handle,
                                        CUmemAllocationHandleType type, unsigned long long flags) {
  return call(driver().mem_export_to_shareable_handle, shareable, handle, type, flags);
}
CUresult mem_import_from_shareable_handle(CUmemGenericAllocationHandle* handle, void* os_handle,
                                          CUmemAllocationHandleType type) {
  return call(driver().mem_import_from_shareable_handle, handle, os_handle, type);
}
CUresult mem_address_reserve(CUdeviceptr* pointer, std::size_t size, std::size_t alignment,
                             CUdeviceptr address, unsigned long long flags) {
  return call(driver().mem_address_reserve, pointer, size, alignment, address, flags);
}
CUresult mem_address_free(CUdeviceptr pointer, std::size_t size) {
  return call(driver().mem_address_free, pointer, size);
}
CUresult mem_map(CUdeviceptr pointer, std::size_t size, std::size_t offset,
                 CUmemGenericAllocationHandle handle, unsigned long long flags) {
  return call(driver().mem_map, pointer, size, offset, handle, flags);
}
CUresult mem_unmap(CUdeviceptr pointer, std::size_t size) {
  return call(driver().mem_unmap, pointer, size);
}
CUresult mem_set_access(CUdeviceptr pointer, std::size_t size, const CUmemAccessDesc* desc,
                        std::size_t count) {
  return call(driver().mem_set_access, pointer, size, desc, count);
}
CUresult device_get_uuid(CUuuid* uuid, int device) {
  CUdevice handle = 0;
  if (CUresult status = call(driver().device_get, &handle, device); status != CUDA_SUCCESS) {
    return status;
  }
  return call(driver().device_get_uuid, uuid, handle);
}
CUresult get_error_name(CUresult status, const char** name) {
  return call(driver().get_error_name, status, name);
}
CUresult get_error_string(CUresult status, const char** text) {
  if (status == kMissing && driver().failure != cudaSuccess) {
    // Without a driver neither the entry point nor its error text exist: say why instead.
    *text = cudaGetErrorName(driver().failure);
    return CUDA_SUCCESS;
  }
  return call(driver().get_error_string, status, text);
}

// Address constants only, so the table is constant-initialized; the driver entry points are
// resolved behind these functions on first use.
const CudaIpcApi kRealCudaIpcApi = {
    &cudaEventCreateWithFlags,
    &cudaEventDestroy,
    &cudaEventRecord,
    &cudaEventQuery,
    &cudaEventSynchronize,
    &cudaStreamWaitEvent,
    &cudaStreamCreateWithFlags,
    &cudaStreamDestroy,
    &cudaIpcGetEventHandle,
    &cudaIpcOpenEventHandle,
    &cudaIpcGetMemHandle,
    &cudaIpcOpenMemHandle,
    &cudaIpcCloseMemHandle,
    &cudaGetDeviceCount,
    &pointer_get_attributes,
    &mem_get_address_range,
    &mem_retain_allocation_handle,
    &mem_get_allocation_granularity,
    &mem_create,
    &mem_release,
    &mem_export_to_shareable_handle,
    &mem_import_from_shareable_handle,
    &mem_address_reserve,
    &mem_address_free,
    &mem_map,
    &mem_unmap,
    &mem_set_access,
    &device_get_uuid,
    &get_error_name,
    &get_error_string,
};

}  // namespace

std::atomic<const CudaIpcApi*> g_cuda_ipc_api{&kRealCudaIpcApi};

const CudaIpcApi& real_cuda_ipc_api() noexcept { return kRealCudaIpcApi; }

const CudaIpcApi* install_cuda_ipc_api(const CudaIpcApi* api) noexcept {
  return g_cuda_ipc_api.exchange(api != nullptr ? api : &kRealCudaIpcApi,
                                 std::memory_order_acq_rel);
}

}  // namespace holoscan::detail
