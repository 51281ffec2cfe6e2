// The pool memory that exports without a driver query per tensor: each allocation knows its
// handle for other processes (a VMM allocation's fd, made once; a cudaMalloc allocation's legacy
// handle, asked for once) and keeps it for its whole life.
#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <utility>

#include "cuda/cuda_error.hpp"
#include "cuda/device_guard.hpp"
#include "holoscan/ipc/pool_memory.hpp"
#include "ipc/cuda/cuda_ipc_api.hpp"
#include "ipc/cuda/vmm_allocation.hpp"
#include "ipc/export/exportable_memory.hpp"

namespace holoscan::ipc {
namespace {

using detail::ExportableAllocation;

Error out_of_host_memory() {
  return Error{ErrorCode::kResourceExhausted, "TensorPool::create: out of host memory", 0};
}

// The facts every export of the allocation shares.
ExportableAllocation describe(const PoolAllocation& memory, int device, MemoryHandleKind kind) {
  ExportableAllocation allocation;
  allocation.kind = kind;
  allocation.allocation_id = memory.id();
  allocation.base = memory.data();
  allocation.bytes = memory.bytes();
  allocation.device = device;
  return allocation;
}

class VmmPoolAllocation final : public detail::ExportablePoolAllocation {
 public:
  VmmPoolAllocation(std::unique_ptr<detail::VmmAllocation> vmm, UniqueFd fd) noexcept
      : vmm_(std::move(vmm)), fd_(std::move(fd)) {}
  void* data() const noexcept override { return vmm_->base(); }
  std::size_t bytes() const noexcept override { return vmm_->bytes(); }
  expected<ExportableAllocation, Error> exportable_allocation() override {
    ExportableAllocation allocation = describe(*this, vmm_->device(), MemoryHandleKind::kPosixFd);
    allocation.fd = fd_.get();  // lent: the fd lives as long as the allocation
    return allocation;
  }

 private:
  std::unique_ptr<detail::VmmAllocation> vmm_;  // unmapped and released last
  UniqueFd fd_;
};

class CudaIpcPoolAllocation final : public detail::ExportablePoolAllocation {
 public:
  CudaIpcPoolAllocation(std::unique_ptr<PoolAllocation> memory, int device) noexcept
      : memory_(std::move(memory)), device_(device) {}
  void* data() const noexcept override { return memory_->data(); }
  std::size_t bytes() const noexcept override { return memory_->bytes(); }
  expected<ExportableAllocation, Error> exportable_allocation() override {
    ExportableAllocation allocation = describe(*this, device_, MemoryHandleKind::kCudaIpc);
    std::lock_guard<std::mutex> lock(mutex_);
    if (!handle_ready_) {
      // The handle names the allocation for its whole life: asked for once, lent to every export.
      detail::DeviceGuard guard(device_);
      if (guard.status() != cudaSuccess) {
        return make_unexpected(detail::cuda_error(guard.status(), guard.failed_call()));
      }
      cudaIpcMemHandle_t handle{};
      if (cudaError_t status = detail::cuda_ipc().ipc_get_mem_handle(&handle, memory_->data());
          status != cudaSuccess) {
        return make_unexpected(detail::cuda_error(status, "cudaIpcGetMemHandle"));
      }
      std::memcpy(handle_.data(), &handle, sizeof(handle));
      handle_ready_ = true;
    }
    allocation.handle = handle_;
    return allocation;
  }

 private:
  std::unique_ptr<PoolAllocation> memory_;  // cudaMalloc memory of the default provider
  int device_;
  std::mutex mutex_;
  bool handle_ready_ = false;
  std::array<std::uint8_t, kIpcHandleBytes> handle_{};
};

class ShareableProvider final : public PoolMemoryProvider {
 public:
  expected<std::unique_ptr<PoolAllocation>, Error> allocate(int device,
                                                            std::size_t bytes) override {
    try {
      return allocate_vmm(device, bytes);
    } catch (const std::bad_alloc&) {
      return make_unexpected(out_of_host_memory());  // what was made is released on the way
    }
  }

 private:
  static expected<std::unique_ptr<PoolAllocation>, Error> allocate_vmm(int device,
                                                                       std::size_t bytes) {
    auto vmm = detail::VmmAllocation::create(device, bytes);
    if (!vmm) {
      return tl::unexpected<Error>(std::move(vmm.error()));
    }
    auto fd = (*vmm)->export_fd();
    if (!fd) {
      return tl::unexpected<Error>(std::move(fd.error()));
    }
    auto* allocation = new (std::nothrow) VmmPoolAllocation(std::move(*vmm), std::move(*fd));
    if (allocation == nullptr) {
      return make_unexpected(out_of_host_memory());
    }
    return std::unique_ptr<PoolAllocation>(allocation);
  }
};

class CudaIpcProvider final : public PoolMemoryProvider {
 public:
  expected<std::unique_ptr<PoolAllocation>, Error> allocate(int device,
                                                            std::size_t bytes) override {
    auto memory = cuda_malloc_->allocate(device, bytes);
    if (!memory) {
      return memory;
    }
    auto* allocation = new (std::nothrow) CudaIpcPoolAllocation(std::move(*memory), device);
    if (allocation == nullptr) {
      return make_unexpected(out_of_host_memory());
    }
    return std::unique_ptr<PoolAllocation>(allocation);
  }

 private:
  std::shared_ptr<PoolMemoryProvider> cuda_malloc_ = default_pool_memory();
};

}  // namespace

std::shared_ptr<PoolMemoryProvider> shareable_pool_memory() {
  return std::make_shared<ShareableProvider>();
}

std::shared_ptr<PoolMemoryProvider> cuda_ipc_pool_memory() {
  return std::make_shared<CudaIpcProvider>();
}

}  // namespace holoscan::ipc
