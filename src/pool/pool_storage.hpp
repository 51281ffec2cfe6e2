#pragma once
// The memory of a TensorPool: one host, cudaMalloc or (shareable) VMM allocation that every block
// of the pool lies in, freed when the last block's reference lets go of it.
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

#include "holoscan/ipc/fd.hpp"
#include "holoscan/tensor_pool.hpp"
#include "ipc/cuda/vmm_allocation.hpp"
#include "ipc/export/exportable_memory.hpp"

namespace holoscan {

struct TensorPool::Storage {
  /** @brief At least `bytes` of the memory `config` asks for; `bytes()` may round it up. */
  static expected<std::shared_ptr<Storage>, Error> allocate(const TensorPoolConfig& config,
                                                            std::size_t bytes);
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  /** @brief Frees the memory: runs once the GPU has passed every point on every block. */
  ~Storage();

  /** @brief The first byte; blocks follow each other from here. */
  void* memory() const noexcept { return memory_; }
  /** @brief The allocation's size (rounded up to the VMM granularity for shareable pools). */
  std::size_t bytes() const noexcept { return bytes_; }

  /** @brief The allocation as an exporter sends it: its fd (shareable) or its legacy handle. */
  expected<detail::ExportableAllocation, Error> exportable();

  /** @brief Use allocate(). */
  Storage() = default;

 private:
  void* memory_ = nullptr;
  std::size_t bytes_ = 0;
  PoolMemory kind_ = PoolMemory::kHost;
  int device_ = 0;
  std::uint64_t allocation_id_ = 0;
  std::unique_ptr<detail::VmmAllocation> vmm_;  // shareable device memory
  ipc::UniqueFd shareable_fd_;                  // exported once, lent to every export
  std::mutex legacy_mutex_;
  bool legacy_ready_ = false;
  std::array<std::uint8_t, ipc::kIpcHandleBytes> legacy_handle_{};
};

}  // namespace holoscan
