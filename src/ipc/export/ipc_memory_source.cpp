#include "ipc/export/ipc_memory_source.hpp"

#include <cstdint>
#include <cstring>
#include <string>

#include "cuda/cuda_error.hpp"
#include "cuda/device_guard.hpp"
#include "ipc/cuda/cuda_driver_error.hpp"
#include "ipc/cuda/cuda_ipc_api.hpp"

namespace holoscan::detail {
namespace {

constexpr const char* kWho = "ipc export: ";

Error refused(ErrorCode code, const std::string& why) {
  return Error{code, std::string(kWho) + why, 0};
}

Error managed_memory() {
  return refused(ErrorCode::kInvalidArgument,
                 "managed memory (cudaMallocManaged) cannot be shared between processes");
}

Error pinned_host_memory() {
  return refused(ErrorCode::kInvalidArgument,
                 "pinned host memory (cudaMallocHost, cudaHostRegister) cannot be shared between "
                 "processes; copy it into a shareable TensorPool");
}

Error host_memory() {
  return refused(ErrorCode::kInvalidArgument,
                 "host memory that CUDA did not allocate cannot be shared between processes; copy "
                 "it into a shareable TensorPool");
}

// Refusals decided from the DLPack device alone, before any CUDA call.
expected<void, Error> check_device_type(const DLDevice& device) {
  switch (device.device_type) {
    case kDLCUDA:
      return {};
    case kDLCPU:
      return make_unexpected(host_memory());
    case kDLCUDAHost:
      return make_unexpected(pinned_host_memory());
    case kDLCUDAManaged:
      return make_unexpected(managed_memory());
    default:
      return make_unexpected(refused(
          ErrorCode::kInvalidArgument,
          "device type " + std::to_string(device.device_type) + " is not CUDA device memory"));
  }
}

struct PointerFacts {
  unsigned int memory_type = 0;
  int is_managed = 0;  // the driver writes a boolean: zeroed ints read it on either width
  int device = -1;
  int legacy_ipc = 0;
  std::uint64_t handle_types = 0;
  CUmemoryPool pool = nullptr;
};

expected<PointerFacts, Error> pointer_facts(const void* pointer) {
  PointerFacts facts;
  CUpointer_attribute attributes[] = {
      CU_POINTER_ATTRIBUTE_MEMORY_TYPE,          CU_POINTER_ATTRIBUTE_IS_MANAGED,
      CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,       CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE,
      CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE,
  };
  void* data[] = {&facts.memory_type, &facts.is_managed,   &facts.device,
                  &facts.legacy_ipc,  &facts.handle_types, &facts.pool};
  static_assert(sizeof(attributes) / sizeof(attributes[0]) == sizeof(data) / sizeof(data[0]),
                "one destination per attribute");
  if (auto status = check_driver(
          cuda_ipc().pointer_get_attributes(sizeof(data) / sizeof(data[0]), attributes, data,
                                            reinterpret_cast<CUdeviceptr>(pointer)),
          "cuPointerGetAttributes");
      !status) {
    return tl::unexpected<Error>(std::move(status.error()));
  }
  return facts;
}

expected<void, Error> legacy_handle(ExportableAllocation& allocation) {
  DeviceGuard guard(allocation.device);
  if (guard.status() != cudaSuccess) {
    return make_unexpected(cuda_error(guard.status(), guard.failed_call()));
  }
  cudaIpcMemHandle_t handle{};
  if (cudaError_t status =
          cuda_ipc().ipc_get_mem_handle(&handle, const_cast<void*>(allocation.base));
      status != cudaSuccess) {
    return make_unexpected(cuda_error(status, "cudaIpcGetMemHandle"));
  }
  std::memcpy(allocation.handle.data(), &handle, sizeof(handle));
  allocation.kind = ipc::MemoryHandleKind::kCudaIpc;
  return {};
}

expected<void, Error> posix_fd(ExportableAllocation& allocation, const void* pointer) {
  CUmemGenericAllocationHandle handle = 0;
  if (auto status =
          check_driver(cuda_ipc().mem_retain_allocation_handle(&handle, const_cast<void*>(pointer)),
                       "cuMemRetainAllocationHandle");
      !status) {
    return status;
  }
  int fd = -1;
  const CUresult exported = cuda_ipc().mem_export_to_shareable_handle(
      &fd, handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
  (void)cuda_ipc().mem_release(handle);  // the fd holds the allocation from here on
  if (auto status = check_driver(exported, "cuMemExportToShareableHandle"); !status) {
    return status;
  }
  allocation.owned_fd = ipc::UniqueFd(fd);
  allocation.kind = ipc::MemoryHandleKind::kPosixFd;
  return {};
}

}  // namespace

expected<ExportableAllocation, Error> shareable_allocation(const Tensor& tensor) {
  if (auto device = check_device_type(tensor.device()); !device) {
    return tl::unexpected<Error>(std::move(device.error()));
  }
  const TensorMemoryReference* reference = tensor.dl_ctx()->memory_reference.get();
  PoolAllocation* pool = reference != nullptr ? pool_allocation(*reference) : nullptr;
  if (auto* exportable = dynamic_cast<ExportablePoolAllocation*>(pool)) {
    return exportable->exportable_allocation();
  }
  const void* pointer = tensor.data();
  auto facts = pointer_facts(pointer);
  if (!facts) {
    return tl::unexpected<Error>(std::move(facts.error()));
  }
  if (facts->is_managed != 0) {
    return make_unexpected(managed_memory());
  }
  if (facts->memory_type == CU_MEMORYTYPE_HOST) {
    return make_unexpected(pinned_host_memory());
  }
  if (facts->memory_type != CU_MEMORYTYPE_DEVICE) {
    return make_unexpected(host_memory());
  }
  if (facts->pool != nullptr) {
    return make_unexpected(refused(
        ErrorCode::kNotImplemented,
        "memory from a stream-ordered pool (cudaMallocAsync) cannot be exported by this library "
        "(no cudaMemPoolExportPointer support); allocate it from a shareable TensorPool"));
  }
  ExportableAllocation allocation;
  allocation.device = facts->device;
  CUdeviceptr base = 0;
  std::size_t bytes = 0;
  if (auto status = check_driver(
          cuda_ipc().mem_get_address_range(&base, &bytes, reinterpret_cast<CUdeviceptr>(pointer)),
          "cuMemGetAddressRange");
      !status) {
    return tl::unexpected<Error>(std::move(status.error()));
  }
  allocation.base = reinterpret_cast<const void*>(base);
  allocation.bytes = bytes;
  expected<void, Error> handle;
  if (facts->legacy_ipc != 0) {
    handle = legacy_handle(allocation);
  } else if ((facts->handle_types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) != 0) {
    handle = posix_fd(allocation, pointer);
  } else {
    return make_unexpected(refused(
        ErrorCode::kInvalidArgument,
        "this device allocation cannot be shared: CUDA reports it neither cudaIpcGetMemHandle-"
        "capable nor exportable as a POSIX file descriptor (allocate it from a shareable "
        "TensorPool)"));
  }
  if (!handle) {
    return tl::unexpected<Error>(std::move(handle.error()));
  }
  return allocation;
}

}  // namespace holoscan::detail
