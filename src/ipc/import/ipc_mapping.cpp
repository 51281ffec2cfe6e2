#include "ipc/import/ipc_mapping.hpp"

#include <cstring>
#include <string>

#include "cuda/cuda_error.hpp"
#include "cuda/device_guard.hpp"
#include "ipc/cuda/cuda_driver_error.hpp"
#include "ipc/cuda/cuda_ipc_api.hpp"

namespace holoscan::ipc::detail {
namespace {

using holoscan::detail::cuda_ipc;

// A legacy handle says nothing about its size: the mapping is measured, so that an exporter that
// claims a larger allocation cannot make a tensor reach past what is mapped.
expected<void, Error> check_legacy_size(const void* base, std::uint64_t bytes) {
  CUdeviceptr start = 0;
  std::size_t size = 0;
  if (auto status = holoscan::detail::check_driver(
          cuda_ipc().mem_get_address_range(&start, &size, reinterpret_cast<CUdeviceptr>(base)),
          "cuMemGetAddressRange");
      !status) {
    return status;
  }
  if (start != reinterpret_cast<CUdeviceptr>(base) || size < bytes) {
    return make_unexpected(ErrorCode::kInvalidArgument,
                           "ipc import: the descriptor claims an allocation of " +
                               std::to_string(bytes) + " bytes, the exporter's handle maps " +
                               std::to_string(size));
  }
  return {};
}

}  // namespace

expected<std::shared_ptr<ImportedMapping>, Error> ImportedMapping::open(
    const TensorDescriptor& descriptor, int fd, int device) {
  std::shared_ptr<ImportedMapping> mapping;
  try {
    mapping.reset(new ImportedMapping());
  } catch (...) {
    return make_unexpected(ErrorCode::kResourceExhausted, "ipc import: out of host memory");
  }
  mapping->device_ = device;
  if (descriptor.handle_kind == MemoryHandleKind::kPosixFd) {
    auto vmm = holoscan::detail::VmmAllocation::import(fd, descriptor.allocation_bytes, device);
    if (!vmm) {
      return make_unexpected(std::move(vmm.error()));
    }
    mapping->vmm_ = std::move(*vmm);
    mapping->base_ = static_cast<char*>(mapping->vmm_->base());
    return mapping;
  }
  holoscan::detail::DeviceGuard guard(device);
  if (guard.status() != cudaSuccess) {
    return make_unexpected(holoscan::detail::cuda_error(guard.status(), guard.failed_call()));
  }
  cudaIpcMemHandle_t handle{};
  std::memcpy(&handle, descriptor.handle_bytes.data(), sizeof(handle));
  void* base = nullptr;
  if (cudaError_t status =
          cuda_ipc().ipc_open_mem_handle(&base, handle, cudaIpcMemLazyEnablePeerAccess);
      status != cudaSuccess) {
    return make_unexpected(holoscan::detail::cuda_error(status, "cudaIpcOpenMemHandle"));
  }
  mapping->legacy_ = static_cast<char*>(base);
  mapping->base_ = mapping->legacy_;
  if (auto size = check_legacy_size(base, descriptor.allocation_bytes); !size) {
    return make_unexpected(std::move(size.error()));
  }
  return mapping;
}

ImportedMapping::~ImportedMapping() {
  if (legacy_ != nullptr) {
    holoscan::detail::DeviceGuard guard(device_);
    if (cuda_ipc().ipc_close_mem_handle(legacy_) != cudaSuccess) {
      (void)holoscan::detail::cuda().get_last_error();
    }
  }
}

expected<std::shared_ptr<ImportedMapping>, Error> MappingCache::get(
    const TensorDescriptor& descriptor, UniqueFd fd, int device) {
  const std::uint64_t id = descriptor.allocation_id;
  if (id != 0) {
    const auto found = entries_.find(id);
    if (found != entries_.end() && found->second.kind == descriptor.handle_kind &&
        found->second.bytes == descriptor.allocation_bytes &&
        (descriptor.handle_kind != MemoryHandleKind::kCudaIpc ||
         found->second.handle == descriptor.handle_bytes)) {
      found->second.last_use = ++clock_;
      return found->second.mapping;  // `fd` names what is mapped already: closed on return
    }
  }
  auto mapping = ImportedMapping::open(descriptor, fd.get(), device);
  if (!mapping) {
    return mapping;
  }
  ++opened_;
  if (id == 0) {
    return mapping;
  }
  try {
    // A different allocation under a known id replaces the entry; imports keep the old mapping.
    Entry& entry = entries_[id];
    entry = Entry{*mapping, descriptor.handle_kind, descriptor.handle_bytes,
                  descriptor.allocation_bytes, ++clock_};
  } catch (...) {
    return mapping;  // not cached: still usable for this import
  }
  evict_idle();
  return mapping;
}

void MappingCache::evict_idle() noexcept {
  while (entries_.size() > kMaxIdle) {
    auto oldest = entries_.end();
    for (auto e = entries_.begin(); e != entries_.end(); ++e) {
      // use_count() == 1: only the cache holds it, and only this (locked) cache hands it out.
      if (e->second.mapping.use_count() == 1 &&
          (oldest == entries_.end() || e->second.last_use < oldest->second.last_use)) {
        oldest = e;
      }
    }
    if (oldest == entries_.end()) {
      return;  // every mapping is in use
    }
    entries_.erase(oldest);
  }
}

}  // namespace holoscan::ipc::detail
