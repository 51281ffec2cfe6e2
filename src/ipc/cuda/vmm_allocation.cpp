#include "ipc/cuda/vmm_allocation.hpp"

#include <cstdint>
#include <string>

#include "cuda/cuda_error.hpp"
#include "cuda/device_guard.hpp"
#include "ipc/cuda/cuda_driver_error.hpp"
#include "ipc/cuda/cuda_ipc_api.hpp"
#include "stream/stream_point.hpp"

namespace holoscan::detail {
namespace {

CUmemAllocationProp shareable_properties(int device) noexcept {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return prop;
}

// The driver functions act on the current context's device (cuMemSetAccess, cuMemMap), so every
// step runs with the allocation's device current.
expected<void, Error> enter_device(const DeviceGuard& guard) noexcept {
  if (guard.status() != cudaSuccess) {
    return tl::unexpected<Error>(cuda_error(guard.status(), guard.failed_call()));
  }
  return {};
}

}  // namespace

expected<std::unique_ptr<VmmAllocation>, Error> VmmAllocation::create(int device,
                                                                      std::size_t bytes) {
  DeviceGuard guard(device);
  if (auto entered = enter_device(guard); !entered) {
    return tl::unexpected<Error>(std::move(entered.error()));
  }
  const CUmemAllocationProp prop = shareable_properties(device);
  std::size_t granularity = 0;
  if (auto status = check_driver(cuda_ipc().mem_get_allocation_granularity(
                                     &granularity, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
                                 "cuMemGetAllocationGranularity");
      !status) {
    return tl::unexpected<Error>(std::move(status.error()));
  }
  if (granularity == 0) {
    granularity = 1;
  }
  const std::size_t rounded = (bytes + granularity - 1) / granularity * granularity;
  if (rounded < bytes) {
    return make_unexpected(ErrorCode::kInvalidArgument, "cuMemCreate: " + std::to_string(bytes) +
                                                            " bytes overflow when rounded");
  }
  std::unique_ptr<VmmAllocation> allocation(new VmmAllocation(device));
  if (CUresult status = cuda_ipc().mem_create(&allocation->handle_, rounded, &prop, 0);
      status != CUDA_SUCCESS) {
    Error error = driver_error(status, "cuMemCreate");
    if (status == CUDA_ERROR_OUT_OF_MEMORY) {
      error.code = ErrorCode::kResourceExhausted;
    }
    return tl::unexpected<Error>(std::move(error));
  }
  allocation->has_handle_ = true;
  if (auto mapped = allocation->map(rounded, /*prefer_read_only=*/false); !mapped) {
    return tl::unexpected<Error>(std::move(mapped.error()));
  }
  return allocation;
}

expected<std::unique_ptr<VmmAllocation>, Error> VmmAllocation::import(int fd, std::size_t bytes,
                                                                      int device) {
  DeviceGuard guard(device);
  if (auto entered = enter_device(guard); !entered) {
    return tl::unexpected<Error>(std::move(entered.error()));
  }
  std::unique_ptr<VmmAllocation> allocation(new VmmAllocation(device));
  // The driver takes the descriptor's number as the handle and does not take ownership of it.
  void* os_handle = reinterpret_cast<void*>(static_cast<std::intptr_t>(fd));
  if (auto status = check_driver(
          cuda_ipc().mem_import_from_shareable_handle(&allocation->handle_, os_handle,
                                                      CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
          "cuMemImportFromShareableHandle");
      !status) {
    return tl::unexpected<Error>(std::move(status.error()));
  }
  allocation->has_handle_ = true;
  if (auto mapped = allocation->map(bytes, /*prefer_read_only=*/true); !mapped) {
    return tl::unexpected<Error>(std::move(mapped.error()));
  }
  return allocation;
}

expected<void, Error> VmmAllocation::map(std::size_t bytes, bool prefer_read_only) {
  if (auto status = check_driver(cuda_ipc().mem_address_reserve(&base_, bytes, 0, 0, 0),
                                 "cuMemAddressReserve");
      !status) {
    return status;
  }
  reserved_ = true;
  bytes_ = bytes;
  if (auto status = check_driver(cuda_ipc().mem_map(base_, bytes, 0, handle_, 0), "cuMemMap");
      !status) {
    return status;
  }
  mapped_ = true;
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = device_;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READ;
  if (prefer_read_only && cuda_ipc().mem_set_access(base_, bytes, &access, 1) == CUDA_SUCCESS) {
    read_only_ = true;
    return {};
  }
  // Drivers that refuse read-only device mappings still give read-write ones.
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  return check_driver(cuda_ipc().mem_set_access(base_, bytes, &access, 1), "cuMemSetAccess");
}

expected<ipc::UniqueFd, Error> VmmAllocation::export_fd() const {
  int fd = -1;
  if (auto status = check_driver(cuda_ipc().mem_export_to_shareable_handle(
                                     &fd, handle_, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
                                 "cuMemExportToShareableHandle");
      !status) {
    return tl::unexpected<Error>(std::move(status.error()));
  }
  return ipc::UniqueFd(fd);
}

VmmAllocation::~VmmAllocation() {
  if (::getpid() != maker_) {
    return;  // a forked child's copy: the parent's mapping, left to the child's exit
  }
  // As every free: never in global capture mode, which another thread's capture would refuse.
  const RelaxedCaptureScope relaxed;
  DeviceGuard guard(device_);
  if (mapped_) {
    (void)cuda_ipc().mem_unmap(base_, bytes_);
  }
  if (reserved_) {
    (void)cuda_ipc().mem_address_free(base_, bytes_);
  }
  if (has_handle_) {
    (void)cuda_ipc().mem_release(handle_);
  }
}

}  // namespace holoscan::detail
