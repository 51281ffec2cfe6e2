#include "ipc/import/ipc_mapping.hpp"

#include <cstring>
#include <string>

#include "cuda/cuda_error.hpp"
#include "cuda/device_guard.hpp"
#include "ipc/cuda/cuda_driver_error.hpp"
#include "ipc/cuda/cuda_ipc_api.hpp"
#include "stream/stream_point.hpp"

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
  if (legacy_ != nullptr && ::getpid() == opener_) {
    // Unmapping synchronizes: never in global capture mode, which another thread's capture
    // would refuse.
    const holoscan::detail::RelaxedCaptureScope relaxed;
    holoscan::detail::DeviceGuard guard(device_);
    if (cuda_ipc().ipc_close_mem_handle(legacy_) != cudaSuccess) {
      (void)holoscan::detail::cuda().get_last_error();
    }
  }
}

expected<std::shared_ptr<ImportedMapping>, Error> MappingCache::get(
    const TensorDescriptor& descriptor, UniqueFd fd, int device, bool from_channel) {
  const std::uint64_t id = descriptor.allocation_id;
  const auto found = id != 0 ? entries_.find(id) : entries_.end();
  if (found != entries_.end()) {
    // The device too: a mapping made for one device is no other device's memory.
    if ((found->second.from_channel || !from_channel) &&
        found->second.kind == descriptor.handle_kind && found->second.mapping->device() == device &&
        found->second.bytes == descriptor.allocation_bytes &&
        (descriptor.handle_kind != MemoryHandleKind::kCudaIpc ||
         found->second.handle == descriptor.handle_bytes)) {
      found->second.last_use = ++clock_;
      return found->second.mapping;  // `fd` names what is mapped already: closed on return
    }
  }
  if (descriptor.handle_kind == MemoryHandleKind::kPosixFd && !fd.valid()) {
    // Its first import was refused (the exporter sends the fd again once the refusal reaches
    // it), or the exporter never sent the fd: nothing here maps it.
    return make_unexpected(ErrorCode::kInvalidArgument,
                           "ipc import: export " + std::to_string(descriptor.export_id) +
                               " came without the file descriptor of allocation " +
                               std::to_string(id) + ", which is not mapped here");
  }
  auto mapping = ImportedMapping::open(descriptor, fd.get(), device);
  if (!mapping) {
    return mapping;
  }
  ++opened_;
  if (id == 0) {
    return mapping;
  }
  if (!from_channel && found != entries_.end() && found->second.from_channel) {
    return mapping;  // the caller's word serves this import alone: the channel's mapping stays
  }
  try {
    // A different allocation under a known id replaces the entry; imports keep the old mapping.
    Entry& entry = entries_[id];
    if (entry.mapping != nullptr) {
      count_fd_entry(entry, -1);
    }
    entry = Entry{*mapping,
                  descriptor.handle_kind,
                  descriptor.handle_bytes,
                  descriptor.allocation_bytes,
                  ++clock_,
                  from_channel};
    count_fd_entry(entry, +1);
  } catch (...) {
    // Not cached: still usable for this import. A kPosixFd allocation's next export that comes
    // without its fd is refused then, and the exporter sends the fd again.
    return mapping;
  }
  evict();
  return mapping;
}

std::shared_ptr<ImportedMapping> MappingCache::forget(std::uint64_t id,
                                                      bool channels_too) noexcept {
  const auto found = entries_.find(id);
  if (found == entries_.end() || (!channels_too && found->second.from_channel)) {
    return nullptr;
  }
  std::shared_ptr<ImportedMapping> mapping = std::move(found->second.mapping);
  count_fd_entry(found->second, -1);
  entries_.erase(found);
  return mapping;
}

void MappingCache::count_fd_entry(const Entry& entry, int change) noexcept {
  if (entry.kind == MemoryHandleKind::kPosixFd) {
    std::size_t& count = fd_entries_[entry.from_channel ? 1 : 0];
    count = change > 0 ? count + 1 : count - 1;
  }
}

bool MappingCache::evict_oldest(MemoryHandleKind kind, std::optional<bool> side,
                                bool idle_only) noexcept {
  auto oldest = entries_.end();
  for (auto e = entries_.begin(); e != entries_.end(); ++e) {
    // use_count() == 1: only the cache holds it, and only this (locked) cache hands it out.
    if (e->second.kind == kind && (!side || e->second.from_channel == *side) &&
        (!idle_only || e->second.mapping.use_count() == 1) &&
        (oldest == entries_.end() || e->second.last_use < oldest->second.last_use)) {
      oldest = e;
    }
  }
  if (oldest == entries_.end()) {
    return false;
  }
  (void)forget(oldest->first);
  return true;
}

void MappingCache::evict() noexcept {
  // An exporter keeps at most kRememberedAllocations fds counted as sent, naming the one it
  // forgets: more than that is a broken exporter, whose exports then go refused, never mapped
  // from the wrong memory.
  while (fd_entries_[1] > kRememberedAllocations &&
         evict_oldest(MemoryHandleKind::kPosixFd, /*side=*/true, /*idle_only=*/false)) {
  }
  // A caller's kPosixFd mappings count against no exporter's bound: past kMaxIdle of them the
  // least recently used goes (imports keep theirs), never one the channel made.
  while (fd_entries_[0] > kMaxIdle &&
         evict_oldest(MemoryHandleKind::kPosixFd, /*side=*/false, /*idle_only=*/false)) {
  }
  const std::size_t fd_entries = fd_entries_[0] + fd_entries_[1];
  while (entries_.size() - fd_entries > kMaxIdle &&
         evict_oldest(MemoryHandleKind::kCudaIpc, std::nullopt, /*idle_only=*/true)) {
  }
}

}  // namespace holoscan::ipc::detail
