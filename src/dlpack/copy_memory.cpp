#include "dlpack/copy_memory.hpp"

#include <algorithm>
#include <new>
#include <optional>
#include <utility>

#include "cuda/cuda_error.hpp"
#include "cuda/device_guard.hpp"
#include "stream/stream_point.hpp"

namespace holoscan::detail {

constexpr std::align_val_t kHostAlignment{256};

struct CopyMemory::Allocation {
  void* memory = nullptr;
  DLDevice device{};

  // Frees the memory the way it was allocated; runs after every point, never throws.
  static void free(void* context) noexcept {
    std::unique_ptr<Allocation> self(static_cast<Allocation*>(context));
    if (self->memory == nullptr) {
      return;  // none was taken
    }
    // cudaFree and cudaFreeHost synchronize the device: in global mode CUDA refuses them (and
    // invalidates the capture) while another thread captures a graph, which would leak the memory.
    std::optional<RelaxedCaptureScope> relaxed;
    if (self->device.device_type != kDLCPU) {
      relaxed.emplace();
    }
    switch (self->device.device_type) {
      case kDLCPU:
        ::operator delete(self->memory, kHostAlignment);
        return;
      case kDLCUDAHost:
        (void)succeeded_or_cleared(cuda().free_host(self->memory));
        return;
      case kDLCUDAManaged:
        (void)succeeded_or_cleared(cuda().free(self->memory));
        return;
      default: {
        // Every use of the memory has completed: the free needs no user stream (which may be
        // gone by now), only the memory's device. The calling thread's per-thread stream, unless
        // that thread is capturing it (a caller's thread whose copy failed before any point was
        // recorded): the free would go into the graph instead of running, so it is synchronous.
        const DeviceGuard guard(self->device.device_id);
        cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
        if (succeeded_or_cleared(cuda().stream_is_capturing(cudaStreamPerThread, &capture)) &&
            capture == cudaStreamCaptureStatusNone) {
          (void)succeeded_or_cleared(cuda().free_async(self->memory, cudaStreamPerThread));
        } else {
          (void)succeeded_or_cleared(cuda().free(self->memory));
        }
        return;
      }
    }
  }
};

bool copyable_device_type(std::int32_t type) noexcept {
  return type == kDLCPU || type == kDLCUDA || type == kDLCUDAHost || type == kDLCUDAManaged;
}

bool host_memory_type(std::int32_t type) noexcept { return type == kDLCPU || type == kDLCUDAHost; }

CopyMemory::CopyMemory(std::unique_ptr<Allocation> allocation) noexcept
    : allocation_(std::move(allocation)), data_(allocation_->memory) {}

CopyMemory::~CopyMemory() { release_when_safe(&Allocation::free, allocation_.release()); }

namespace {

// Takes `bytes` of memory for `device` into `allocation`.
expected<void, Error> take_memory(CopyMemory::Allocation& allocation, std::size_t bytes,
                                  cudaStream_t stream);

}  // namespace

expected<std::shared_ptr<CopyMemory>, Error> CopyMemory::allocate(DLDevice device,
                                                                  std::size_t bytes,
                                                                  cudaStream_t stream) {
  std::unique_ptr<Allocation> allocation(new (std::nothrow) Allocation{nullptr, device});
  if (allocation == nullptr) {
    return make_unexpected(ErrorCode::kResourceExhausted, "Tensor copy: out of host memory");
  }
  // The owner first, so that nothing fails once memory was taken from `stream`: freed then, it
  // would go back on another stream, unordered with its allocation.
  std::shared_ptr<CopyMemory> owner;
  try {
    owner = std::make_shared<CopyMemory>(std::move(allocation));
  } catch (const std::bad_alloc&) {
    return make_unexpected(ErrorCode::kResourceExhausted, "Tensor copy: out of host memory");
  }
  if (auto taken = take_memory(*owner->allocation_, std::max<std::size_t>(bytes, 1), stream);
      !taken) {
    return forward_error(std::move(taken));
  }
  owner->data_ = owner->allocation_->memory;
  return owner;
}

namespace {

expected<void, Error> take_memory(CopyMemory::Allocation& allocation, std::size_t bytes,
                                  cudaStream_t stream) {
  switch (allocation.device.device_type) {
    case kDLCPU:
      allocation.memory = ::operator new(bytes, kHostAlignment, std::nothrow);
      if (allocation.memory == nullptr) {
        return make_unexpected(ErrorCode::kResourceExhausted,
                               "Tensor copy: out of host memory for the copy");
      }
      return {};
    case kDLCUDAHost: {
      // Allocations may synchronize: in global mode CUDA refuses them (and invalidates the
      // capture) while another thread captures a graph.
      const RelaxedCaptureScope relaxed;
      return check_cuda(cuda().malloc_host(&allocation.memory, bytes), "cudaMallocHost");
    }
    case kDLCUDAManaged: {
      const RelaxedCaptureScope relaxed;  // as above
      return check_cuda(cuda().malloc_managed(&allocation.memory, bytes, cudaMemAttachGlobal),
                        "cudaMallocManaged");
    }
    default:
      return check_cuda(cuda().malloc_async(&allocation.memory, bytes, stream), "cudaMallocAsync");
  }
}

}  // namespace

}  // namespace holoscan::detail
