#pragma once
/**
 * @file
 * @brief Where a device TensorPool takes its memory: an interface through which another library
 *        (the cross-process one, holoscan::dlpack_ipc) provides memory the core does not make.
 */
#include <cstddef>
#include <cstdint>
#include <memory>

#include "holoscan/expected.hpp"
#include "holoscan/export.hpp"
#include "holoscan/tensor_memory_reference.hpp"

namespace holoscan {

/** @brief The one allocation that every block of a TensorPool lies in; freed when destroyed. */
class HOLOSCAN_DLPACK_API PoolAllocation {
 public:
  /** @brief Takes an id of its own (see id()). */
  PoolAllocation() noexcept;
  PoolAllocation(const PoolAllocation&) = delete;
  PoolAllocation& operator=(const PoolAllocation&) = delete;
  /** @brief Frees the memory; the pool destroys it once the GPU has passed every block's points. */
  virtual ~PoolAllocation();

  /** @brief The first byte; the blocks follow each other from here. */
  virtual void* data() const noexcept = 0;
  /** @brief Bytes allocated: at least those asked for. */
  virtual std::size_t bytes() const noexcept = 0;
  /** @brief Never 0, and never given to another allocation of this process, even a later one. */
  std::uint64_t id() const noexcept { return id_; }

 private:
  std::uint64_t id_;
};

/** @brief Makes the memory of device TensorPools (TensorPoolConfig::memory_provider). */
class HOLOSCAN_DLPACK_API PoolMemoryProvider {
 public:
  /** @brief Nothing to release: allocations outlive their provider. */
  virtual ~PoolMemoryProvider() = default;
  /**
   * @brief At least `bytes` of device memory on CUDA device `device`, or why not
   *        (kResourceExhausted when the device is out of memory).
   */
  virtual expected<std::unique_ptr<PoolAllocation>, Error> allocate(int device,
                                                                    std::size_t bytes) = 0;
};

/** @brief cudaMalloc on the pool's device: what a device pool whose config names no provider uses. */
HOLOSCAN_DLPACK_API std::shared_ptr<PoolMemoryProvider> default_pool_memory();

/**
 * @brief The allocation that `reference` lends its memory from when it is a TensorPool block's
 *        memory reference (a pool tensor's memory_reference()), else null; valid while
 *        `reference` lives.
 */
HOLOSCAN_DLPACK_API PoolAllocation* pool_allocation(
    const TensorMemoryReference& reference) noexcept;

}  // namespace holoscan
