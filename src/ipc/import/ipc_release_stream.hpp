#pragma once
// The importer's side of a release, all on the GPU: each connection has, per device, an internal
// stream that waits on every deallocation point of an import, then records an interprocess event
// that the exporter polls.
//
// Each ring of release events is recorded on its one stream. An exporter may still be polling an
// event when the ring comes round and records it again; that later point is further down the same
// stream, so it completes only after the one the exporter waits for: the exporter then waits a
// little longer, never less. That is why the events need no word back from the exporter before
// they are reused, and why a ring never leaves its stream while it may still be recorded.
//
// One stream per connection, not per process: a consumer stream that waits on a dead exporter's
// event never runs again (ReadinessWait::kOnGpu; docs/ipc.md), nor do the deallocation points on
// it, nor a release stream made to wait on them. Shared, that stream would hold back every later
// release of the process to every exporter; per connection it holds back only the dead one's.
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

/** @brief Interprocess events per ring (a bound on the release events an exporter opens). */
inline constexpr std::size_t kReleaseRingSize = 64;

/** @brief One device's release stream of a connection and the events recorded there in turn. */
struct ReleaseRing {
  cudaStream_t stream = nullptr;  ///< Made on the first release.
  std::vector<IpcEvent> events;   ///< Grows to kReleaseRingSize, then is reused in turn.
  std::size_t next = 0;           ///< The event recorded next once the ring is full.
  std::size_t last = 0;           ///< The event recorded last (its completion is the ring's).
};

/** @brief One importer connection's release rings, one per device; thread-safe. */
class HOLOSCAN_DLPACK_ABI ReleaseRings {
 public:
  ReleaseRings() noexcept;
  /**
   * @brief Gives each ring's events back to the interprocess pool and destroys its stream once
   *        every release recorded there has completed; a ring still running is kept aside until
   *        it has (see retire_release_rings), one that never completes is never reused. Never
   *        waits; does nothing in a child forked from the process that made it.
   */
  ~ReleaseRings();
  ReleaseRings(const ReleaseRings&) = delete;
  ReleaseRings& operator=(const ReleaseRings&) = delete;

  /**
   * @brief Orders `device`'s release stream after every point in `points` and records a release
   *        event there; returns its cudaIpcEventHandle_t bytes. Never blocks on the GPU.
   */
  expected<std::array<std::uint8_t, ipc::kIpcHandleBytes>, Error> record(
      int device, const StreamPointList& points) noexcept;

 private:
  SpinMutex mutex_;  // one release at a time per ring: another's record must not miss its waits
  std::array<ReleaseRing, kMaxPoolDevices> rings_;
  const pid_t owner_;  // the process that made it: a forked child's copy names the parent's objects
};

/**
 * @brief Gives back the rings of gone connections whose releases have all completed; returns how
 *        many are still kept aside. Called when a connection makes a stream, so that the rings
 *        kept aside are bounded by the connections that went since; never waits.
 */
std::size_t retire_release_rings() noexcept;

/**
 * @brief Destroys the streams of the rings kept aside and gives their events back to the
 *        interprocess pool, completed or not, through the tables in use. For tests that swap the
 *        CUDA tables, once every connection is gone.
 */
HOLOSCAN_DLPACK_ABI void reset_release_streams() noexcept;

}  // namespace holoscan::detail
