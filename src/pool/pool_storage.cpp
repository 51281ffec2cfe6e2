#include "pool/pool_storage.hpp"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

#include "cuda/cuda_error.hpp"
#include "cuda/device_guard.hpp"
#include "ipc/cuda/cuda_ipc_api.hpp"

namespace holoscan {
namespace {

constexpr std::size_t kAlignment = 256;

// Ids are never reused within the process, so an importer's mapping cached under one can never
// be mistaken for a later allocation at the same address.
std::uint64_t next_allocation_id() noexcept {
  static std::atomic<std::uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

expected<std::shared_ptr<TensorPool::Storage>, Error> TensorPool::Storage::allocate(
    const TensorPoolConfig& config, std::size_t bytes) {
  std::shared_ptr<Storage> storage;
  try {
    storage = std::make_shared<Storage>();
  } catch (...) {
    return make_unexpected(ErrorCode::kResourceExhausted, "TensorPool::create: out of host memory");
  }
  storage->kind_ = config.memory;
  storage->device_ = config.device;
  storage->bytes_ = bytes;
  storage->allocation_id_ = next_allocation_id();
  if (config.memory == PoolMemory::kHost) {
    storage->memory_ = std::aligned_alloc(kAlignment, bytes);
    if (storage->memory_ == nullptr) {
      return make_unexpected(
          ErrorCode::kResourceExhausted,
          "TensorPool::create: host allocation of " + std::to_string(bytes) + " bytes failed");
    }
    return storage;
  }
  if (config.shareable) {
    auto vmm = detail::VmmAllocation::create(config.device, bytes);
    if (!vmm) {
      return tl::unexpected<Error>(std::move(vmm.error()));
    }
    auto fd = (*vmm)->export_fd();
    if (!fd) {
      return tl::unexpected<Error>(std::move(fd.error()));
    }
    storage->memory_ = (*vmm)->base();
    storage->bytes_ = (*vmm)->bytes();
    storage->vmm_ = std::move(*vmm);
    storage->shareable_fd_ = std::move(*fd);
    return storage;
  }
  detail::DeviceGuard guard(config.device);
  if (guard.status() != cudaSuccess) {
    return make_unexpected(detail::cuda_error(guard.status(), guard.failed_call()));
  }
  if (cudaError_t status = detail::cuda().malloc(&storage->memory_, bytes); status != cudaSuccess) {
    storage->memory_ = nullptr;
    Error error = detail::cuda_error(status, "cudaMalloc");
    if (status == cudaErrorMemoryAllocation) {
      error.code = ErrorCode::kResourceExhausted;
    }
    return make_unexpected(std::move(error));
  }
  return storage;
}

TensorPool::Storage::~Storage() {
  if (memory_ == nullptr || vmm_ != nullptr) {
    return;  // the VMM allocation unmaps and releases itself
  }
  if (kind_ == PoolMemory::kHost) {
    std::free(memory_);
    return;
  }
  detail::DeviceGuard guard(device_);
  if (detail::cuda().free(memory_) != cudaSuccess) {
    (void)detail::cuda().get_last_error();
  }
}

expected<detail::ExportableAllocation, Error> TensorPool::Storage::exportable() {
  detail::ExportableAllocation allocation;
  allocation.allocation_id = allocation_id_;
  allocation.base = memory_;
  allocation.bytes = bytes_;
  allocation.device = device_;
  if (kind_ == PoolMemory::kHost) {
    return make_unexpected(ErrorCode::kInvalidArgument,
                           "ipc export: host memory (a kHost TensorPool) cannot be shared");
  }
  if (vmm_ != nullptr) {
    allocation.kind = ipc::MemoryHandleKind::kPosixFd;
    allocation.fd = shareable_fd_.get();
    return allocation;
  }
  allocation.kind = ipc::MemoryHandleKind::kCudaIpc;
  std::lock_guard<std::mutex> lock(legacy_mutex_);
  if (!legacy_ready_) {
    // The handle names the allocation for its whole life: asked for once, lent to every export.
    detail::DeviceGuard guard(device_);
    if (guard.status() != cudaSuccess) {
      return make_unexpected(detail::cuda_error(guard.status(), guard.failed_call()));
    }
    cudaIpcMemHandle_t handle{};
    if (cudaError_t status = detail::cuda_ipc().ipc_get_mem_handle(&handle, memory_);
        status != cudaSuccess) {
      return make_unexpected(detail::cuda_error(status, "cudaIpcGetMemHandle"));
    }
    std::memcpy(legacy_handle_.data(), &handle, sizeof(handle));
    legacy_ready_ = true;
  }
  allocation.handle = legacy_handle_;
  return allocation;
}

}  // namespace holoscan
