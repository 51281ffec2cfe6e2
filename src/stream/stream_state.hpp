#pragma once
/**
 * @file
 * @brief The readiness point and the deallocation points of one piece of memory.
 */
#include <atomic>
#include <cstdint>
#include <vector>

#include "holoscan/cuda_handles.hpp"
#include "holoscan/expected.hpp"
#include "holoscan/export.hpp"
#include "spin_mutex.hpp"
#include "stream/stream_point.hpp"
#include "stream/stream_point_list.hpp"
#include "wing_api.hpp"

namespace holoscan::detail {

/**
 * @brief Readiness (producer -> consumers) and deallocation (consumers -> reuse) stream points.
 *
 * Thread-safe. Events come from the per-device pool and go back to it in reset() or when the
 * caller returns taken points. Readiness keeps one event per device it was recorded on until
 * then, so that a host wait in another thread never waits on a recycled event.
 */
class HOLOSCAN_DLPACK_ABI StreamState {
 public:
  StreamState() = default;
  StreamState(const StreamState&) = delete;
  StreamState& operator=(const StreamState&) = delete;
  /** @brief Returns every event still held to its pool. */
  ~StreamState() {
    if (holds_points_unshared()) {  // its owner is going: no other thread can reach it now
      reset();
    }
  }

  /**
   * @brief Records the readiness point on `stream`; false, state unchanged, on any failure.
   *
   * Moved to another stream of the same device, the point is ordered after the previous one (the
   * new stream waits for it: one cudaStreamWaitEvent), so consumers, reuse and the release wait
   * for both; moved to another device, the previous device's point is kept beside it for reuse
   * and the release, and coming back to a device whose point is kept, the new stream waits for
   * that point first (its event is recorded again).
   */
  bool set_readiness_stream(cudaStream_t stream) noexcept;
  /** @brief Whether a readiness point exists. */
  bool has_readiness() const noexcept { return has_readiness_.load(std::memory_order_acquire); }
  /** @brief The stream of the readiness point, or null. */
  cudaStream_t readiness_stream() const noexcept {
    return readiness_stream_.load(std::memory_order_acquire);
  }
  /**
   * @brief Makes `consumer` wait for the readiness point: one cudaStreamWaitEvent at most. Takes
   *        no lock (see the definition for why that is safe).
   */
  expected<void, Error> synchronize_for_consumer(cudaStream_t consumer);
  /** @brief Blocks until the readiness point completed; success when there is none. */
  expected<void, Error> synchronize_for_host();

  /** @brief Adds (or moves forward) the deallocation point of `stream`; false on failure. */
  bool set_deallocation_stream(cudaStream_t stream) noexcept;
  /** @brief Number of deallocation points held. */
  std::size_t deallocation_point_count() const noexcept;
  /**
   * @brief Drops the deallocation points that completed; true when none is left and the
   *        readiness points (the producer's own work, on every device it recorded them on)
   *        completed too. Never blocks.
   */
  bool poll_idle() noexcept;
  /**
   * @brief Makes `stream` wait for every point held (one cudaStreamWaitEvent each, none for a
   *        point recorded on `stream` itself). The points stay until the new owner's first record
   *        on `stream` (ordered after them all) retires them, so that a block dropped unused still
   *        waits for its old readers; where they cannot stay (a default-stream handle, more than
   *        the inline room), one point recorded on `stream` after the waits takes their place. On
   *        a failed wait or record nothing is forgotten and the error names the call. Nothing
   *        held: no call at all. Never blocks, never queries.
   */
  expected<void, Error> hand_over_to(cudaStream_t stream) noexcept;
  /** @brief hand_over_to() for a stream already located (its device and id known). */
  expected<void, Error> hand_over_to(cudaStream_t stream, const StreamLocation& location) noexcept;
  /** @brief Whether any readiness or deallocation point is held. */
  bool holds_points() const noexcept;
  /**
   * @brief Whether a point held was recorded before this process was forked (by the parent): the
   *        memory may still be in use by the parent's GPU work, which nothing here can wait for.
   *        No lock and no CUDA call in a process that was not forked. The pool asks it before
   *        hand_over_to(), which waits on every point: a block it names is never handed over.
   */
  bool holds_points_of_another_process() const noexcept;
  /**
   * @brief holds_points() without the lock, for an owner's destructor: only while no other
   *        thread can reach this state.
   */
  bool holds_points_unshared() const noexcept {
    return readiness_.event != nullptr || !deallocation_.empty();
  }
  /**
   * @brief Hands every point (deallocation and readiness) to the caller, who must return their
   *        events once completed; the state is left empty.
   */
  HOLOSCAN_DLPACK_WING_API StreamPointList take_release_points() noexcept;
  /**
   * @brief take_release_points() without the lock, for an owner's destructor: only while no
   *        other thread can reach this state (the owner's last reference is gone).
   */
  HOLOSCAN_DLPACK_WING_API StreamPointList take_release_points_unshared() noexcept;

  /** @brief Returns every event to its pool and forgets all points. */
  void reset() noexcept;

 private:
  static bool order_after(const StreamPoint& point, const StreamLocation& next,
                          cudaStream_t stream) noexcept;
  // Under the lock: returns every event to its pool and forgets all points (reset()).
  void forget_points() noexcept;
  // Under the lock: forgets the readiness points, whose events were taken or returned.
  void forget_readiness() noexcept;
  // Under the lock, after a hand-over's waits: keeps every point, `stream` standing for them.
  bool keep_for_hand_over(cudaStream_t stream, const StreamLocation& location) noexcept;
  // Under the lock, after a record on `stream`: retires the kept points it stands for.
  void retire_superseded(cudaStream_t stream, const StreamLocation& location) noexcept;
  // Under the lock: returns the kept points' events and forgets them.
  void drop_superseded() noexcept;
  // Under the lock: whether the kept points passed (then dropped); one query each.
  bool superseded_passed() noexcept;
  static bool capturing_or_unknown(cudaStream_t stream) noexcept;
  static tl::unexpected<Error> failed_consumer_wait(cudaError_t status) noexcept;

  // The flags sit between the lock and the first eight-byte field, in what would be padding.
  mutable SpinMutex mutex_;
  std::atomic<bool> has_readiness_{false};
  bool readiness_covered_ =
      false;  // readiness_ passed, or a deallocation point is ordered after it
  // The first superseded_ deallocation points are a former owner's, kept by a stream-ordered
  // hand-over: superseded_by_ (id superseded_by_id_) waits for them, and its first record retires
  // them (keep_for_hand_over).
  std::uint8_t superseded_ = 0;
  StreamPoint readiness_;
  // readiness_'s stream, event and stream id, written under the lock as a record completes and
  // read by synchronize_for_consumer without it.
  std::atomic<cudaStream_t> readiness_stream_{nullptr};
  std::atomic<cudaEvent_t> readiness_event_{nullptr};
  std::atomic<std::uint64_t> readiness_stream_id_{0};
  std::vector<StreamPoint> spare_readiness_;  // events of devices the readiness used before
  StreamPointList deallocation_;
  cudaStream_t superseded_by_ = nullptr;
  std::uint64_t superseded_by_id_ = 0;
};

}  // namespace holoscan::detail
