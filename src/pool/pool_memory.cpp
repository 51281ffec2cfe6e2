#include "pool/pool_memory.hpp"

#include <atomic>
#include <cstdlib>
#include <new>
#include <string>

#include "cuda/cuda_error.hpp"
#include "cuda/device_guard.hpp"
#include "stream/stream_point.hpp"

namespace holoscan {
namespace {

constexpr std::size_t kAlignment = 256;

// Ids are never reused within the process, so an importer's mapping cached under one can never
// be mistaken for a later allocation at the same address.
std::uint64_t next_allocation_id() noexcept {
  static std::atomic<std::uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

// Pageable host memory: kHost pools.
class HostAllocation final : public PoolAllocation {
 public:
  HostAllocation(void* memory, std::size_t bytes) noexcept : memory_(memory), bytes_(bytes) {}
  ~HostAllocation() override { std::free(memory_); }
  void* data() const noexcept override { return memory_; }
  std::size_t bytes() const noexcept override { return bytes_; }

 private:
  void* memory_;
  std::size_t bytes_;
};

// cudaMalloc memory: kDevice pools without a provider.
class DeviceAllocation final : public PoolAllocation {
 public:
  DeviceAllocation(void* memory, std::size_t bytes, int device) noexcept
      : memory_(memory), bytes_(bytes), device_(device) {}
  ~DeviceAllocation() override {
    // cudaFree synchronizes the device: in global mode CUDA refuses it (and invalidates the
    // capture) while another thread captures a graph, which would leak the memory.
    const detail::RelaxedCaptureScope relaxed;
    detail::DeviceGuard guard(device_);
    if (detail::cuda().free(memory_) != cudaSuccess) {
      (void)detail::cuda().get_last_error();
    }
  }
  void* data() const noexcept override { return memory_; }
  std::size_t bytes() const noexcept override { return bytes_; }

 private:
  void* memory_;
  std::size_t bytes_;
  int device_;
};

Error out_of_host_memory() {
  return Error{ErrorCode::kResourceExhausted, "TensorPool::create: out of host memory", 0};
}

expected<std::unique_ptr<PoolAllocation>, Error> allocate_host(std::size_t bytes) {
  void* memory = std::aligned_alloc(kAlignment, bytes);
  if (memory == nullptr) {
    return make_unexpected(
        ErrorCode::kResourceExhausted,
        "TensorPool::create: host allocation of " + std::to_string(bytes) + " bytes failed");
  }
  auto* allocation = new (std::nothrow) HostAllocation(memory, bytes);
  if (allocation == nullptr) {
    std::free(memory);
    return make_unexpected(out_of_host_memory());
  }
  return std::unique_ptr<PoolAllocation>(allocation);
}

expected<std::unique_ptr<PoolAllocation>, Error> allocate_device(int device, std::size_t bytes) {
  // cudaMalloc may synchronize: in global mode CUDA refuses it (and invalidates the capture) while
  // another thread captures a graph.
  const detail::RelaxedCaptureScope relaxed;
  detail::DeviceGuard guard(device);
  if (guard.status() != cudaSuccess) {
    return make_unexpected(detail::device_guard_error(guard, device, "TensorPool::create"));
  }
  void* memory = nullptr;
  if (cudaError_t status = detail::cuda().malloc(&memory, bytes); status != cudaSuccess) {
    Error error = detail::cuda_error(status, "cudaMalloc");
    if (status == cudaErrorMemoryAllocation) {
      error.code = ErrorCode::kResourceExhausted;
    }
    return make_unexpected(std::move(error));
  }
  auto* allocation = new (std::nothrow) DeviceAllocation(memory, bytes, device);
  if (allocation == nullptr) {
    (void)detail::succeeded_or_cleared(detail::cuda().free(memory));
    return make_unexpected(out_of_host_memory());
  }
  return std::unique_ptr<PoolAllocation>(allocation);
}

class DefaultProvider final : public PoolMemoryProvider {
 public:
  expected<std::unique_ptr<PoolAllocation>, Error> allocate(int device,
                                                            std::size_t bytes) override {
    return allocate_device(device, bytes);
  }
};

}  // namespace

PoolAllocation::PoolAllocation() noexcept : id_(next_allocation_id()) {}

PoolAllocation::~PoolAllocation() = default;

std::shared_ptr<PoolMemoryProvider> default_pool_memory() {
  return std::make_shared<DefaultProvider>();
}

namespace detail {

expected<std::unique_ptr<PoolAllocation>, Error> allocate_pool_memory(
    const TensorPoolConfig& config, std::size_t bytes) {
  if (config.memory == PoolMemory::kHost) {
    return allocate_host(bytes);
  }
  if (config.memory_provider == nullptr) {
    return allocate_device(config.device, bytes);
  }
  auto allocation = config.memory_provider->allocate(config.device, bytes);
  if (allocation && (*allocation == nullptr || (*allocation)->data() == nullptr ||
                     (*allocation)->bytes() < bytes)) {
    return make_unexpected(ErrorCode::kFailure,
                           "TensorPool::create: the memory provider gave no memory or less than " +
                               std::to_string(bytes) + " bytes");
  }
  return allocation;
}

}  // namespace detail
}  // namespace holoscan
