#pragma once
// What an exporter needs to know about the allocation behind a tensor, and the interface through
// which pool memory that this library made (shareable_pool_memory(), cuda_ipc_pool_memory())
// hands it over without a driver query.
#include <array>
#include <cstdint>

#include "holoscan/expected.hpp"
#include "holoscan/export.hpp"
#include "holoscan/ipc/descriptor.hpp"
#include "holoscan/ipc/fd.hpp"
#include "holoscan/pool_memory.hpp"

namespace holoscan::detail {

/** @brief The allocation a tensor lies in, and how another process can map it. */
struct HOLOSCAN_DLPACK_ABI ExportableAllocation {
  ipc::MemoryHandleKind kind = ipc::MemoryHandleKind::kCudaIpc;  ///< How the handle travels.
  /** @brief Unique for the allocation's whole life in this process; 0 when no such id is known
   *         (importers then map it for one export only, so a reused address is never mistaken
   *         for a mapping they hold). */
  std::uint64_t allocation_id = 0;
  const void* base = nullptr;  ///< Start of the allocation in this process.
  std::uint64_t bytes = 0;     ///< Size of the allocation.
  int device = 0;              ///< Device the memory lives on.
  int fd = -1;                 ///< kPosixFd: the owner's descriptor, borrowed while it lives.
  ipc::UniqueFd owned_fd;      ///< kPosixFd: a descriptor made for this export alone.
  std::array<std::uint8_t, ipc::kIpcHandleBytes> handle{};  ///< kCudaIpc: cudaIpcMemHandle_t.

  /** @brief The descriptor to send beside the descriptor bytes (-1 for kCudaIpc). */
  int descriptor() const noexcept { return owned_fd.valid() ? owned_fd.get() : fd; }
};

/** @brief Pool memory that describes its allocation for export without asking CUDA. */
class HOLOSCAN_DLPACK_ABI ExportablePoolAllocation : public PoolAllocation {
 public:
  /** @brief The allocation and its handle, or why it cannot be shared. */
  virtual expected<ExportableAllocation, Error> exportable_allocation() = 0;
};

}  // namespace holoscan::detail
