#pragma once
// Which exports one importer connection may still import: each export once, so that no Release
// ends the exporter's claim under another import of it. An Exporter numbers its exports in
// publish order, so the ids its channel carries increase: one at or below the highest carried
// that is not held here was given back already (or came out of order). Ids imported ahead of the
// channel (a descriptor that came another way, through import_tensor) are remembered when they
// finish, a bounded number of them, until the channel passes them; only when more than that
// finish ahead do the oldest fold into a floor, so that a caller's odd id never makes the
// exporter's own later Publishes look seen.
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace holoscan::ipc::detail {

/** @brief Exports finished ahead of the channel that are remembered one by one. */
inline constexpr std::size_t kRememberedAhead = 256;

/** @brief The admission record of one connection; not thread-safe (the core's books_mutex_ guards
 * it). */
class Admissions {
 public:
  /** @brief What an export id may be. */
  enum class Verdict {
    kNew,       ///< Importable now.
    kNoExport,  ///< Export id 0, which no exporter gives.
    kHeld,      ///< Imported here and not yet given back.
    kSeen,      ///< Given back already, refused, or out of the channel's order.
    /// Given back or refused before the channel carried it (a caller's import_tensor of an id
    /// ahead of the channel's): its Publish, when it comes, is refused and given back again, so
    /// that the exporter's claim ends whether or not it held the export at the first Release.
    kFinishedAhead,
  };

  /** @brief The verdict on `id` now. */
  Verdict verdict(std::uint64_t id) const noexcept;
  /** @brief Takes `id` (whose verdict is kNew) as held; throws bad_alloc, changing nothing. */
  void hold(std::uint64_t id);
  /** @brief The channel carried export `id`: ids up to it are seen unless held. */
  void carried(std::uint64_t id) noexcept;
  /** @brief Export `id` was given back (or refused): seen from now on. Never allocates. */
  void finish(std::uint64_t id) noexcept;
  /** @brief Exports held. */
  std::size_t held() const noexcept { return held_.size(); }

 private:
  // At or below what the channel carried or the floor, or remembered as finished ahead.
  bool finished_or_passed(std::uint64_t id) const noexcept;

  std::vector<std::uint64_t> held_;  // few at a time: a scan is cheaper than hashing
  std::uint64_t carried_ = 0;        // the highest id the channel carried
  std::uint64_t floor_ = 0;          // ids at or below it finished ahead and were folded
  std::array<std::uint64_t, kRememberedAhead> ahead_{};  // finished above `carried_`
  std::size_t ahead_count_ = 0;
};

}  // namespace holoscan::ipc::detail
