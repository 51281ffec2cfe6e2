#pragma once
// Recording, waiting on and querying stream points; shared by readiness and deallocation.
#include <chrono>
#include <cstdint>

#include "cuda/cuda_api.hpp"
#include "holoscan/expected.hpp"
#include "holoscan/export.hpp"
#include "stream/stream_point_list.hpp"
#include "wing_api.hpp"

namespace holoscan::detail {

/** @brief Who recorded a point, and how many records that thread had made with it. */
struct RecordStamp {
  std::uint64_t recorder = 0;  ///< The recording thread; 0: the record failed.
  std::uint64_t order = 0;     ///< Its records so far, this one included.
};

/** @brief Whether `stream` names a default stream (legacy or per-thread) by a shared handle. */
inline bool is_default_stream_handle(cudaStream_t stream) noexcept {
  return stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread;
}

/** @brief Which device a stream runs on, and which thread's per-thread stream it is. */
struct HOLOSCAN_DLPACK_ABI StreamLocation {
  int device = -1;                ///< Device of the stream.
  std::uintptr_t thread_key = 0;  ///< Non-zero only for cudaStreamPerThread.
  std::uint64_t stream_id = 0;    ///< cudaStreamGetId of an explicit stream; 0 for the others.

  StreamLocation() = default;
  /** @brief The location of a stream with these fields. */
  StreamLocation(int on_device, std::uintptr_t key, std::uint64_t id) noexcept
      : device(on_device), thread_key(key), stream_id(id) {}

  /** @brief A point of this stream with `event`, recorded as `stamp` says (not yet: none). */
  StreamPoint point(cudaStream_t stream, cudaEvent_t event, RecordStamp stamp = {}) const noexcept {
    // Built whole, field by field: a point written in pieces and then copied as a block stalls
    // the copy's loads until the pieces' stores are done (no store forwarding across them).
    return StreamPoint{stream, event, device, thread_key, stream_id, stamp.recorder, stamp.order};
  }
  /** @brief Whether `point` was recorded on this very stream (same handle, device and id). An
   *         explicit stream whose id could not be read (0) is never taken for it: its handle may
   *         be a destroyed stream's. */
  bool is_stream_of(const StreamPoint& point, cudaStream_t stream) const noexcept {
    return point.stream == stream && point.device == device && point.thread_key == thread_key &&
           point.stream_id == stream_id && (stream_id != 0 || is_default_stream_handle(stream));
  }
};

/**
 * @brief Finds the device and id of `stream`; fails for a stream that is capturing a CUDA graph.
 *
 * Default-stream handles mean the current device's default stream, as in every runtime call.
 * An explicit stream costs two calls (capture status, id): its device is remembered by id, which
 * CUDA never gives to another stream.
 */
HOLOSCAN_DLPACK_WING_API expected<StreamLocation, Error> locate_stream(
    cudaStream_t stream) noexcept;

/**
 * @brief The id CUDA gave explicit stream `stream` (never given to another stream, unlike its
 *        handle), or 0 when it cannot be asked (the error is cleared).
 */
std::uint64_t id_of_explicit_stream(cudaStream_t stream) noexcept;

/**
 * @brief Records `point.event` (of `point.device`, the stream's device) on `stream`, and stamps
 *        the point with this thread and its record count (StreamPoint::order).
 */
expected<void, Error> record_point(StreamPoint& point, cudaStream_t stream) noexcept;

/**
 * @brief Records `event` on `stream` as record_point() does; the point's stamp, or a stamp with
 *        recorder 0 when the record failed (its error cleared, and noted: note_point_failure).
 *        Returned in registers, for a point built whole afterwards (StreamLocation::point).
 */
RecordStamp record_event(cudaEvent_t event, cudaStream_t stream) noexcept;

/**
 * @brief Notes why this thread's point could not be recorded (the hooks that record points answer
 *        with a bool), for a caller of the library's own that reports it: take_point_failure().
 */
void note_point_failure(Error error) noexcept;
/** @brief The failure noted last on this thread (taken: none is left), or an empty Error. */
Error take_point_failure() noexcept;

/**
 * @brief Whether `point` was recorded before this process was forked (by the parent): its event
 *        is of a CUDA context this process does not have, and can be neither asked nor waited on.
 */
bool recorded_in_another_process(const StreamPoint& point) noexcept;

/** @brief Whether this process is a forked child that may hold points its parent recorded (one
 *         relaxed load). */
bool forked_from_another_process() noexcept;

/**
 * @brief Whether the GPU has passed `point`. A capture forbidding the query counts as not yet;
 *        a broken or unloading context counts as passed (nothing more will run on it). A point
 *        recorded in another process (recorded_in_another_process) never passes here, and costs no
 *        CUDA call.
 */
HOLOSCAN_DLPACK_WING_API bool point_completed(const StreamPoint& point) noexcept;

/**
 * @brief Puts the calling thread in relaxed capture mode for a scope, so that querying or waiting
 *        on events neither fails nor invalidates a graph capture of this or another thread.
 */
class HOLOSCAN_DLPACK_WING_API RelaxedCaptureScope {
 public:
  RelaxedCaptureScope() noexcept;
  ~RelaxedCaptureScope();
  RelaxedCaptureScope(const RelaxedCaptureScope&) = delete;
  RelaxedCaptureScope& operator=(const RelaxedCaptureScope&) = delete;

 private:
  cudaStreamCaptureMode mode_;
  bool changed_ = false;
};

/** @brief Who is asking: a caller's thread, or the library's own release thread. */
enum class QueryThread {
  kCaller,   ///< Leave the current device alone: it is the caller's.
  kRelease,  ///< Make each point's device current first, so no other device gets a context.
};

/** @brief On the release thread: makes `device` current, once per device switch. */
HOLOSCAN_DLPACK_ABI void use_device_on_release_thread(int device) noexcept;

/** @brief Returns the events of completed points and removes them; true when none is left. */
HOLOSCAN_DLPACK_WING_API bool drop_completed_points(
    StreamPointList& points, QueryThread thread = QueryThread::kCaller) noexcept;

/**
 * @brief Polls the points (every `rest`) until all completed, their events returned, or until
 *        `deadline`; true when none is left. From a caller's thread.
 */
bool drop_points_until(StreamPointList& points, std::chrono::steady_clock::time_point deadline,
                       std::chrono::microseconds rest) noexcept;

/**
 * @brief In a forked child, when a point of `points` was recorded in another process (the
 *        parent): empties the list and returns true, the parent's events forgotten (never asked nor
 *        pooled), this process's returned to their pools. The release waiting for those points
 *        must then be dropped without running: the parent's GPU may still use the memory, and
 *        its deleter would call into a CUDA runtime unusable here. False otherwise (untouched).
 */
HOLOSCAN_DLPACK_WING_API bool forget_points_of_another_process(StreamPointList& points) noexcept;

/**
 * @brief Blocks until every point completed, then returns their events (a last resort); true.
 *        A wait that a capture refuses is asked again by queries until the point passes.
 *        False, at once, when a point was recorded in another process (the list is forgotten as
 *        forget_points_of_another_process() does), or when a point's record went into a graph
 *        being captured (it never passes here), or when captures refused every ask for 2 s:
 *        the caller must not run its release.
 */
[[nodiscard]] HOLOSCAN_DLPACK_WING_API bool wait_and_drop_points(
    StreamPointList& points, QueryThread thread = QueryThread::kCaller) noexcept;

/** @brief Returns every point's event to its pool and empties the list. */
void release_points(StreamPointList& points) noexcept;

}  // namespace holoscan::detail
