#pragma once
// The importer's side of a release, all on the GPU: each connection has, per device, an internal
// stream that waits on every deallocation point of an import, then records an interprocess event
// that the exporter polls.
//
// Each ring of release events is recorded on its one stream. An exporter may still be polling an
// event when the ring comes round and records it again; that later point is further down the same
// stream, so it completes only after the one the exporter waits for: the exporter then waits a
// little longer, never less. That is why the events need no word back from the exporter before
// they are reused within the ring.
//
// One stream per connection, not per process: a consumer stream that waits on a dead exporter's
// event never runs again (ReadinessWait::kOnGpu; docs/ipc.md), nor do the deallocation points on
// it, nor a release stream made to wait on them. Shared by the process, that stream held back
// every later release to every exporter; per connection it holds back the releases of the
// connections whose imports had a point on that consumer stream.
//
// For the same reason a gone connection's events are kept aside: its exporter asks an event about
// its latest record, and a record elsewhere could complete before the release it waits for, or
// never. Only a connection to the same live exporter process (known by its pidfd) takes one over,
// once every record of that gone ring has completed, and only for a record that completes at once
// (its stream idle, the release's points passed), or once that completion is a second old (an
// exporter polling its claims has seen it by then; one that has not waits longer, never less).
// So reconnecting to a long-lived exporter piles nothing up. They go to the interprocess pool once
// that process has exited; without its pidfd they never leave the process's keeping.
#include <sys/types.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "holoscan/expected.hpp"
#include "holoscan/export.hpp"
#include "holoscan/ipc/descriptor.hpp"
#include "ipc/cuda/ipc_event_pool.hpp"
#include "spin_mutex.hpp"
#include "stream/pooled_events.hpp"
#include "stream/stream_point_list.hpp"

namespace holoscan::detail {

/** @brief Interprocess events per ring (a bound on the release events a connection makes). */
inline constexpr std::size_t kReleaseRingSize = 64;

/** @brief One device's release stream of a connection and the events recorded there in turn. */
struct ReleaseRing {
  cudaStream_t stream = nullptr;  ///< Made on the first release.
  std::vector<IpcEvent> events;   ///< Up to kReleaseRingSize, then recorded in turn.
  std::size_t next = 0;           ///< The event recorded next once the ring is full.
  std::size_t last = 0;           ///< The event recorded last (its completion is the ring's).
  bool waits_pending = false;     ///< Waits queued with no record after them (a call failed).
};

/** @brief One importer connection's release rings, one per device; thread-safe. */
class HOLOSCAN_DLPACK_ABI ReleaseRings {
 public:
  /** @brief Rings of a connection whose exporter's pidfd (proven by its Hello) is
   *         `exporter_pidfd` (borrowed: it must outlive these rings; -1 when unknown). */
  explicit ReleaseRings(int exporter_pidfd) noexcept;
  /**
   * @brief Destroys the streams (CUDA lets work queued there finish). The events go back to the
   *        interprocess pool once the exporter's process has exited; until then they are kept
   *        aside for later connections to that process (see the file comment), with one copy of
   *        its pidfd per process; without a pidfd they never reach the pool. Never waits; does
   *        nothing in a child forked from the process that made them.
   */
  ~ReleaseRings();
  ReleaseRings(const ReleaseRings&) = delete;
  ReleaseRings& operator=(const ReleaseRings&) = delete;

  /**
   * @brief Orders `device`'s release stream after every point in `points` and records a release
   *        event there; returns its cudaIpcEventHandle_t bytes. Never blocks on the GPU. Refused
   *        (kFailure) in a child forked from the process that made the rings.
   */
  expected<std::array<std::uint8_t, ipc::kIpcHandleBytes>, Error> record(
      int device, const StreamPointList& points) noexcept;

 private:
  // The index in `ring` of the event to record for a release after `points`.
  expected<std::size_t, Error> next_event(ReleaseRing& ring, int device,
                                          const StreamPointList& points) noexcept;

  SpinMutex mutex_;  // one release at a time per ring: another's record must not miss its waits
  std::array<ReleaseRing, kMaxPoolDevices> rings_;
  const int exporter_pidfd_;
  // The exporter's pid in this process's namespace, read from its pidfd; 0 when unknown.
  const std::int32_t exporter_key_;
  const pid_t owner_;  // the process that made them: a forked child's copy names the parent's
};

/**
 * @brief Gives back to the interprocess pool the events of gone connections whose exporters have
 *        exited; returns how many gone connections' rings are still kept aside. Never waits.
 */
HOLOSCAN_DLPACK_ABI std::size_t retire_release_rings() noexcept;

/**
 * @brief Gives every event kept aside back to the interprocess pool, exporters exited or not, and
 *        closes their pidfds. For tests that swap the CUDA tables, once every connection is gone.
 */
HOLOSCAN_DLPACK_ABI void reset_release_streams() noexcept;

}  // namespace holoscan::detail
