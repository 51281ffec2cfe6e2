#include "stream/stream_state.hpp"

#include <algorithm>
#include <mutex>
#include <utility>

#include "cuda/cuda_error.hpp"
#include "dlpack/without_throwing.hpp"
#include "stream/pooled_events.hpp"
#include "stream/stream_point.hpp"

namespace holoscan::detail {

bool StreamState::set_readiness_stream(cudaStream_t stream) noexcept {
  auto location = locate_stream(stream);
  if (!location) {
    note_point_failure(std::move(location.error()));
    return false;
  }
  std::lock_guard<SpinMutex> lock(mutex_);
  const bool switches_device = readiness_.event == nullptr || readiness_.device != location->device;
  auto spare = spare_readiness_.end();
  if (switches_device) {
    spare = std::find_if(spare_readiness_.begin(), spare_readiness_.end(),
                         [&](const StreamPoint& p) { return p.device == location->device; });
    if (spare == spare_readiness_.end() && readiness_.event != nullptr) {
      // Room to keep the previous device's point, made before anything is recorded: without it
      // that point would be forgotten while its producer may still write.
      try {
        spare_readiness_.reserve(spare_readiness_.size() + 1);
      } catch (...) {
        note_point_failure(make_error(ErrorCode::kResourceExhausted, "out of host memory"));
        return false;
      }
      spare = spare_readiness_.end();  // the reservation may have moved the points
    }
  }
  // The point this device already has (the readiness itself, or one kept from before the readiness
  // left the device) has its one event recorded again below: the stream first waits for that
  // point, so that the new one is ordered after both. (Keeping the old point beside it instead
  // would take a second event and leave consumers, who wait for one point, unordered with the
  // first stream.) One cudaStreamWaitEvent when the stream changes, none when it records again.
  const StreamPoint* kept =
      !switches_device ? &readiness_ : (spare != spare_readiness_.end() ? &*spare : nullptr);
  if (kept != nullptr && !order_after(*kept, *location, stream)) {
    return false;
  }
  // Moved from another device, the stream waits for the readiness there too (a wait on another
  // device's event is allowed): consumers and host waits see one point, which must cover every
  // producer stream before it, whichever device it ran on. The point kept there stays for the
  // release and for a host already waiting on its event.
  if (switches_device && readiness_.event != nullptr &&
      !order_after(readiness_, *location, stream)) {
    return false;
  }
  cudaEvent_t event = kept != nullptr ? kept->event : nullptr;
  if (event == nullptr) {
    auto acquired = acquire_event(location->device);
    if (!acquired) {
      note_point_failure(std::move(acquired.error()));
      return false;
    }
    event = *acquired;
  }
  const RecordStamp stamp = record_event(event, stream);
  if (stamp.recorder == 0) {
    if (kept == nullptr) {
      release_event(location->device, event);  // acquired above
    }
    return false;
  }
  if (switches_device) {
    // The previous device's event stays with this state (a host thread may still wait on it, and
    // the readiness may come back to that device): one event per device, never recycled early.
    if (spare != spare_readiness_.end()) {
      if (readiness_.event != nullptr) {
        *spare = readiness_;
      } else {
        spare_readiness_.erase(spare);
      }
    } else if (readiness_.event != nullptr) {
      spare_readiness_.push_back(readiness_);  // into the room reserved above: never throws
    }
  }
  readiness_ = location->point(stream, event, stamp);
  readiness_covered_ = false;
  readiness_event_.store(event, std::memory_order_release);
  readiness_stream_id_.store(location->stream_id, std::memory_order_release);
  readiness_stream_.store(stream, std::memory_order_release);
  has_readiness_.store(true, std::memory_order_release);
  retire_superseded(stream, *location);
  return true;
}

// Orders what is queued on `stream` (at `next`) from now on after `point`: one
// cudaStreamWaitEvent, none when `point` was recorded on `stream` itself; false on failure.
bool StreamState::order_after(const StreamPoint& point, const StreamLocation& next,
                              cudaStream_t stream) noexcept {
  if (next.is_stream_of(point, stream)) {
    return true;
  }
  auto waited = check_cuda(cuda().stream_wait_event(stream, point.event, 0), "cudaStreamWaitEvent");
  if (!waited) {
    note_point_failure(std::move(waited.error()));
  }
  return waited.has_value();
}

// Without the lock (three atomic read-modify-writes less per three-consumer hop). Safe because:
// - every value read was stored after its record completed (set_readiness_stream stores them
//   last), so a wait or a skip is always against a readiness record that was made;
// - an event read stays this state's until take_release_points(), reset() or a pool block's
//   hand-over to its next allocation (keep_for_hand_over, hand_over_to), which run only when no
//   caller can reach the named allocation any more (the owner's destructor; a pool block that is
//   free, its claims and uses gone; a raw reference kept past that is the caller's error), so it
//   is never waited on after going back to the pool; a device switch keeps the previous event
//   (spare_readiness_), and a record on the same device records the same event again;
// - values of two concurrent set_readiness_stream calls mixed together are still correct: each
//   readiness record is ordered after the previous one, so waiting on either is waiting for the
//   producer as of one of the two calls, and a skip needs the consumer's own id to match the one
//   read, which names (ids are never reused) a stream that holds a completed readiness record.
expected<void, Error> StreamState::synchronize_for_consumer(cudaStream_t consumer) {
  if (!has_readiness()) {
    return {};
  }
  const cudaEvent_t event = readiness_event_.load(std::memory_order_acquire);
  const std::uint64_t stream_id = readiness_stream_id_.load(std::memory_order_acquire);
  if (event == nullptr) {
    return {};  // taken by a release meanwhile: nothing left to wait for
  }
  // A shared default-stream handle can name different streams (per thread, per device), so only
  // an explicit stream handle proves that the consumer is the producer's own stream, and only
  // with the same id: CUDA may give a destroyed stream's handle to a new stream, whose work would
  // not be ordered after the producer's.
  // A producer stream that is capturing a CUDA graph now is no exception: what it captures runs
  // when the graph is launched, on any stream, unordered with the point recorded before the
  // capture began. The wait below then fails as for any capturing consumer (asked only here, so
  // that the wait of every other consumer stays one call).
  const bool is_explicit = !is_default_stream_handle(consumer);
  if (is_explicit && consumer == readiness_stream() && stream_id != 0 &&
      id_of_explicit_stream(consumer) == stream_id && !capturing_or_unknown(consumer)) {
    return {};
  }
  const cudaError_t status = cuda().stream_wait_event(consumer, event, 0);
  if (status == cudaSuccess) {
    return {};
  }
  return failed_consumer_wait(status);
}

// Whether `stream` is capturing a CUDA graph, or cannot tell (the error is cleared): either way
// the consumer's wait is made, and reports what CUDA says.
bool StreamState::capturing_or_unknown(cudaStream_t stream) noexcept {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cuda().stream_is_capturing(stream, &capture) != cudaSuccess) {
    (void)cuda().get_last_error();
    return true;
  }
  return capture != cudaStreamCaptureStatusNone;
}

// Out of line: the error's string work would otherwise make every successful wait save and
// restore the registers it needs. Out of host memory for the message: kResourceExhausted.
[[gnu::noinline, gnu::cold]] tl::unexpected<Error> StreamState::failed_consumer_wait(
    cudaError_t status) noexcept {
  return without_throwing([status] {
    Error error = cuda_error(status, "cudaStreamWaitEvent");
    if (status == cudaErrorStreamCaptureIsolation || status == cudaErrorStreamCaptureUnsupported ||
        status == cudaErrorStreamCaptureInvalidated) {
      // Checked only after the failure, to keep the hot path at one CUDA call.
      error.message +=
          ": the consumer stream is capturing a CUDA graph; synchronize before the capture begins";
    }
    return tl::unexpected<Error>(std::move(error));
  });
}

expected<void, Error> StreamState::synchronize_for_host() {
  if (!has_readiness()) {
    return {};
  }
  cudaEvent_t event = nullptr;
  {
    std::lock_guard<SpinMutex> lock(mutex_);
    event = readiness_.event;
  }
  // Waiting outside the lock keeps consumers of other threads free to synchronize meanwhile; the
  // event stays this state's while the caller can reach it (see synchronize_for_consumer), so it
  // cannot be recycled under this wait. In relaxed mode, as
  // every wait of a caller's thread: in global mode CUDA refuses a wait while another thread
  // captures a graph, and invalidates that capture.
  const RelaxedCaptureScope relaxed;
  return check_cuda(cuda().event_synchronize(event), "cudaEventSynchronize");
}

bool StreamState::set_deallocation_stream(cudaStream_t stream) noexcept {
  auto location = locate_stream(stream);
  if (!location) {
    return false;
  }
  std::lock_guard<SpinMutex> lock(mutex_);
  // A point on the readiness stream itself (its id included: a new stream may have been given a
  // destroyed stream's handle) is ordered after the readiness point. A stream that waited for the
  // readiness would be too, but telling it apart from a new stream under its handle would cost a
  // question per wait: its readiness point is checked on its own instead (poll_idle remembers it
  // once passed).
  const bool covers_readiness = readiness_.event != nullptr && !is_default_stream_handle(stream) &&
                                location->is_stream_of(readiness_, stream);
  for (std::size_t i = 0; i < deallocation_.size(); ++i) {
    StreamPoint& point = deallocation_[i];
    if (location->is_stream_of(point, stream)) {
      if (!record_point(point, stream).has_value()) {  // moves the point forward
        return false;
      }
      readiness_covered_ = readiness_covered_ || covers_readiness;
      if (i < superseded_) {  // a kept point recorded again is this owner's now: out of their span
        --superseded_;
        std::swap(deallocation_[i], deallocation_[superseded_]);
      }
      retire_superseded(stream, *location);
      return true;
    }
  }
  auto event = acquire_event(location->device);
  if (!event) {
    return false;
  }
  const RecordStamp stamp = record_event(*event, stream);
  if (stamp.recorder == 0) {
    release_event(location->device, *event);
    return false;
  }
  // Recorded on the hand-over stream, the point is ordered after the kept points: they go first,
  // so that it takes their room (five kept points would push it past the inline room onto the
  // heap). With one point gone the append cannot allocate: inline room, or overflow capacity.
  retire_superseded(stream, *location);
  if (!deallocation_.emplace_back([&] { return location->point(stream, *event, stamp); })) {
    release_event(location->device, *event);
    return false;
  }
  readiness_covered_ = readiness_covered_ || covers_readiness;
  return true;
}

std::size_t StreamState::deallocation_point_count() const noexcept {
  std::lock_guard<SpinMutex> lock(mutex_);
  return deallocation_.size() - superseded_;  // a former owner's kept points are not this one's
}

bool StreamState::poll_idle() noexcept {
  std::lock_guard<SpinMutex> lock(mutex_);
  if (superseded_ != 0 && !superseded_passed()) {
    return false;
  }
  if (!drop_completed_points(deallocation_)) {
    return false;
  }
  if (spare_readiness_.empty() && (readiness_.event == nullptr || readiness_covered_)) {
    return true;  // nothing left to ask
  }
  // As every query a caller's thread makes: in the caller's global capture mode, CUDA would
  // refuse it and invalidate another thread's capture.
  const RelaxedCaptureScope relaxed;
  // The producer may still write from every device it recorded readiness on, not only the last:
  // no deallocation point is ordered after those older points.
  for (const StreamPoint& spare : spare_readiness_) {
    if (!point_completed(spare)) {
      return false;
    }
  }
  if (readiness_.event == nullptr || readiness_covered_) {
    return true;
  }
  // Passed once, passed for good (until readiness is recorded again): asked no more.
  readiness_covered_ = point_completed(readiness_);
  return readiness_covered_;
}

expected<void, Error> StreamState::hand_over_to(cudaStream_t stream) noexcept {
  if (!holds_points()) {
    return {};  // nothing to wait for, nothing to stand for
  }
  auto location = locate_stream(stream);
  if (!location) {
    return forward_error(std::move(location));
  }
  return hand_over_to(stream, *location);
}

expected<void, Error> StreamState::hand_over_to(cudaStream_t stream,
                                                const StreamLocation& location) noexcept {
  // A point on `stream` itself is ordered before anything queued on it next; default-stream
  // handles may name other streams (other threads, devices), so only explicit handles match
  // (and only under the id located: CUDA gives a destroyed stream's handle to the next one).
  // One wait per point that needs it; the first failure is returned and nothing is forgotten.
  const auto own = [&](const StreamPoint& point) {
    return !is_default_stream_handle(stream) && location.is_stream_of(point, stream);
  };
  const auto order_after = [&](const StreamPoint& point) -> cudaError_t {
    return point.event == nullptr || own(point) ? cudaSuccess
                                                : cuda().stream_wait_event(stream, point.event, 0);
  };
  {
    std::lock_guard<SpinMutex> lock(mutex_);
    if (!holds_points_unshared()) {  // under the lock: shared or not, the same question
      return {};
    }
    cudaError_t status = cudaSuccess;
    for (std::size_t i = 0; i < deallocation_.size() && status == cudaSuccess; ++i) {
      status = order_after(deallocation_[i]);
    }
    if (status == cudaSuccess && !readiness_covered_) {
      status = order_after(readiness_);
    }
    for (std::size_t i = 0; i < spare_readiness_.size() && status == cudaSuccess; ++i) {
      status = order_after(spare_readiness_[i]);
    }
    if (status != cudaSuccess) {
      return tl::unexpected<Error>(cuda_error(status, "cudaStreamWaitEvent"));
    }
    if (keep_for_hand_over(stream, location)) {
      return {};
    }
  }
  // The waits order only what `stream` runs from now on: a block whose new owner drops it before
  // recording a point of its own would otherwise come back with none, and a polling allocate (or
  // another stream's hand-over) would hand it out while the old readers still run. Where the
  // points cannot stay, one point on `stream`, recorded after the waits, stands for them all.
  auto event = acquire_event(location.device);
  if (!event) {
    return forward_error(std::move(event));
  }
  StreamPoint successor = location.point(stream, *event);
  if (auto recorded = record_point(successor, stream); !recorded) {
    release_event(location.device, *event);
    return recorded;
  }
  // The waits took each event as last recorded: the events may be recorded again at once. The
  // successor takes their place under the same lock, so that no call sees the block without one.
  std::lock_guard<SpinMutex> lock(mutex_);
  forget_points();
  (void)deallocation_.push_back(successor);  // the list is empty: within its inline room
  return {};
}

namespace {

// Adds `point` to `points`; should the heap refuse room past the inline points, waits for it here
// instead (a last resort, as when the release queue has no room): a point left out would let the
// release run while its producer may still write. A point the parent recorded before a fork()
// cannot be waited for, and its release must be dropped: it stays on the list in the place of
// one of this process's points, which is waited for instead (a full list has inline points).
void add_or_wait(StreamPointList& points, const StreamPoint& point) noexcept {
  if (points.push_back(point)) {
    return;
  }
  StreamPointList alone;
  if (recorded_in_another_process(point)) {
    for (std::size_t i = 0; i < points.size(); ++i) {
      if (recorded_in_another_process(points[i])) {
        return;  // the list already drops the release; the parent's event is forgotten
      }
    }
    alone.push_back(points[0]);  // inline: never allocates
    points[0] = point;
  } else {
    alone.push_back(point);  // inline: never allocates
  }
  // This process's point: waited for. A record that went into a capture (the stream began
  // capturing while it was recorded, a race of the caller's own) never passes and is dropped.
  (void)wait_and_drop_points(alone);
}

}  // namespace

StreamPointList StreamState::take_release_points() noexcept {
  std::lock_guard<SpinMutex> lock(mutex_);
  return take_release_points_unshared();
}

StreamPointList StreamState::take_release_points_unshared() noexcept {
  StreamPointList points(std::move(deallocation_));
  superseded_ = 0;  // kept points go with the others
  // The readiness events join the list even past its inline room. A readiness point that a
  // deallocation point is ordered after needs no query of its own.
  if (readiness_.event != nullptr) {
    if (readiness_covered_) {
      release_event(readiness_.device, readiness_.event);
    } else {
      add_or_wait(points, readiness_);
    }
  }
  for (const StreamPoint& spare : spare_readiness_) {
    add_or_wait(points, spare);
  }
  forget_readiness();
  return points;
}

void StreamState::forget_readiness() noexcept {
  readiness_ = StreamPoint{};
  readiness_covered_ = false;
  spare_readiness_.clear();
  has_readiness_.store(false, std::memory_order_release);
  readiness_stream_.store(nullptr, std::memory_order_release);
  readiness_event_.store(nullptr, std::memory_order_release);
  readiness_stream_id_.store(0, std::memory_order_release);
}

bool StreamState::holds_points() const noexcept {
  std::lock_guard<SpinMutex> lock(mutex_);
  return readiness_.event != nullptr || !deallocation_.empty();
}

bool StreamState::holds_points_of_another_process() const noexcept {
  if (!forked_from_another_process()) {
    return false;  // one relaxed load: nothing here was recorded elsewhere
  }
  std::lock_guard<SpinMutex> lock(mutex_);
  for (std::size_t i = 0; i < deallocation_.size(); ++i) {
    if (recorded_in_another_process(deallocation_[i])) {
      return true;
    }
  }
  return recorded_in_another_process(readiness_) ||
         std::any_of(spare_readiness_.begin(), spare_readiness_.end(),
                     [](const StreamPoint& spare) { return recorded_in_another_process(spare); });
}

void StreamState::reset() noexcept {
  std::lock_guard<SpinMutex> lock(mutex_);
  forget_points();
}

// The points stay where they are and `stream` stands for them: it waits for them all, so the
// first point the new owner records on it is ordered after them and retires them, with no CUDA
// call of its own (one record a stream-ordered allocate less than a point standing in for them).
// Only an explicit stream with an id is known again, and the readiness points must fit the inline
// room of the deallocation points (no heap under the pool's lock); else the caller records one.
bool StreamState::keep_for_hand_over(cudaStream_t stream, const StreamLocation& location) noexcept {
  const std::size_t readiness_points =
      (readiness_.event != nullptr ? 1 : 0) + spare_readiness_.size();
  if (is_default_stream_handle(stream) || location.stream_id == 0 ||
      deallocation_.size() + readiness_points > StreamPointList::kInlineCapacity) {
    return false;
  }
  // The former owner's readiness points become plain points (the new owner has no readiness
  // yet); within the inline room, so that push_back cannot fail.
  if (readiness_.event != nullptr) {
    (void)deallocation_.push_back(readiness_);
  }
  for (const StreamPoint& spare : spare_readiness_) {
    (void)deallocation_.push_back(spare);
  }
  forget_readiness();
  superseded_ = static_cast<std::uint8_t>(deallocation_.size());
  superseded_by_ = stream;
  superseded_by_id_ = location.stream_id;
  return true;
}

void StreamState::retire_superseded(cudaStream_t stream, const StreamLocation& location) noexcept {
  if (superseded_ != 0 && stream == superseded_by_ && location.stream_id == superseded_by_id_) {
    drop_superseded();
  }
}

// From the top of the span down: each swap_remove fills the hole from the end of the list, which
// is past the span still to go, so only kept points are removed.
void StreamState::drop_superseded() noexcept {
  EventBatch events;
  for (std::size_t i = superseded_; i-- > 0;) {
    events.add(deallocation_[i].device, deallocation_[i].event);
    deallocation_.swap_remove(i);
  }
  superseded_ = 0;
}

bool StreamState::superseded_passed() noexcept {
  const RelaxedCaptureScope relaxed;  // a query in a capture's global mode would invalidate it
  for (std::size_t i = 0; i < superseded_; ++i) {
    if (!point_completed(deallocation_[i])) {
      return false;
    }
  }
  drop_superseded();
  return true;
}

// Nothing will wait for these points, so every event goes straight back to its pool: a release
// list (take_release_points) would take the heap past its inline room (five deallocation points
// and the readiness point), and where the heap refused it, wait on the host for the point, under
// the pool's lock in a stream-ordered allocate.
void StreamState::forget_points() noexcept {
  if (!holds_points_unshared()) {
    return;  // the common case for host memory: nothing to hand back
  }
  EventBatch events;
  for (std::size_t i = 0; i < deallocation_.size(); ++i) {
    events.add(deallocation_[i].device, deallocation_[i].event);
  }
  deallocation_.clear();
  superseded_ = 0;
  if (readiness_.event != nullptr) {
    events.add(readiness_.device, readiness_.event);
  }
  for (const StreamPoint& spare : spare_readiness_) {
    events.add(spare.device, spare.event);
  }
  forget_readiness();
}

}  // namespace holoscan::detail
