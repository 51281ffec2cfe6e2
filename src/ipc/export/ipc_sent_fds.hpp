#pragma once
// Which allocations' fds one peer connection has been sent, so that later Publishes of them go
// without (protocol version 3). Keyed by allocation id: a pool allocation's id is never given to
// other memory in this process (PoolAllocation::id()), so an id the peer has mapped names that
// memory for good; id 0 (memory outside a pool, whose fd is made fresh for each export) is never
// remembered. Fixed size and allocation-free, so that publish() decides before it sends and
// records after, with nothing left that can fail.
#include <array>
#include <cstddef>
#include <cstdint>

#include "holoscan/export.hpp"
#include "holoscan/ipc/message.hpp"

namespace holoscan::ipc::detail {

/** @brief The allocations one peer holds the fd of; not thread-safe (the exporter locks). */
class HOLOSCAN_DLPACK_ABI SentFds {
 public:
  /** @brief What the next Publish of an allocation carries. */
  struct Plan {
    bool attach_fd = true;     ///< Whether the fd goes with it.
    std::uint64_t forget = 0;  ///< The allocation it makes room by (Publish field), or 0.
  };

  /** @brief The plan for a kPosixFd Publish of `allocation` (0: always with its fd). */
  Plan plan(std::uint64_t allocation) const noexcept;
  /** @brief That Publish went out as export `export_id`, as `plan` said. */
  void sent(std::uint64_t allocation, const Plan& plan, std::uint64_t export_id) noexcept;
  /**
   * @brief The peer refused export `export_id` of `allocation`: it holds no mapping of it from
   *        then on, unless the export came before the one that carried the fd (the peer refused
   *        it, dropped its mapping, then mapped that fd), so only then is the fd sent again.
   */
  void refused(std::uint64_t allocation, std::uint64_t export_id) noexcept;
  /** @brief Allocations remembered. */
  std::size_t size() const noexcept { return count_; }

 private:
  struct Entry {
    std::uint64_t allocation = 0;
    std::uint64_t fd_export = 0;  // the export that carried the fd
    std::uint64_t last_use = 0;   // publish order, as the importer sees it
  };
  std::size_t find(std::uint64_t allocation) const noexcept;  // count_ when absent

  std::array<Entry, kRememberedAllocations> entries_{};
  std::size_t count_ = 0;
  std::uint64_t clock_ = 0;
};

}  // namespace holoscan::ipc::detail
