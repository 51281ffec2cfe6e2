#pragma once
// The ids of peers that hung up, which ExportLedger::add() refuses for good. Ids are never reused,
// so the set only grows; it keeps them as ranges, so that ids handed out one after another (as
// the Exporter does) cost one range however many connections come and go.
#include <cstdint>
#include <map>

namespace holoscan::ipc::detail {

/** @brief A set of peer ids kept as disjoint, non-adjacent inclusive ranges. */
class ClosedPeers {
 public:
  /** @brief Adds `id`, merging it with the ranges beside it; may throw std::bad_alloc. */
  void insert(std::uint64_t id);
  /** @brief Whether `id` was added. */
  bool contains(std::uint64_t id) const noexcept;
  /** @brief How many ranges hold the ids (what the set costs). */
  std::size_t ranges() const noexcept { return last_of_.size(); }

 private:
  std::map<std::uint64_t, std::uint64_t> last_of_;  // first id of a range -> its last id
};

}  // namespace holoscan::ipc::detail
