#include "stream/stream_point.hpp"

#include <pthread.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <optional>
#include <thread>
#include <utility>

#include "cuda/cuda_error.hpp"
#include "stream/pooled_events.hpp"

namespace holoscan::detail {
namespace {

// The device of each stream id seen lately by this thread, for the CUDA table that gave the id
// (tests swap tables). An id is never given to another stream, so an entry never goes stale.
struct DeviceOfStream {
  unsigned long long id = 0;
  int device = -1;
  const CudaApi* api = nullptr;
};
constexpr int kRememberedStreamBits = 6;
constexpr std::size_t kRememberedStreams = std::size_t{1} << kRememberedStreamBits;
thread_local std::array<DeviceOfStream, kRememberedStreams> devices_of_streams{};

// Records made by this thread: a number of its own (never reused), and a count.
struct RecordClock {
  std::uint64_t recorder = 0;
  std::uint64_t order = 0;
};
thread_local RecordClock record_clock{};
std::atomic<std::uint64_t> next_recorder{1};

// In a forked child: next_recorder at the fork, so every recorder below it stamped a record of the
// parent (or its parents). 0 in a process that was not forked, or whose parent never numbered a
// thread (so recorded nothing): no point is from before, and the checks stay one load. Read with
// a relaxed load: it is written once, by the child handler, before the child has other threads.
std::atomic<std::uint64_t> first_recorder_of_this_process{0};

// The child of a fork(), on the forking thread (the only one): what was recorded so far is the
// parent's GPU work, which a CUDA context does not carry over. This thread's later records take a
// new number, past the boundary, so that they are not taken for its parent's.
void forget_the_parents_recorders() noexcept {
  const std::uint64_t next = next_recorder.load(std::memory_order_relaxed);
  if (next > 1) {  // else no thread was numbered: nothing was recorded before the fork
    first_recorder_of_this_process.store(next, std::memory_order_relaxed);
  }
  record_clock = RecordClock{};
}

// Registered when the library is loaded, whether or not a release queue is ever made.
[[maybe_unused]] const bool fork_handler_registered =
    pthread_atfork(nullptr, nullptr, &forget_the_parents_recorders) == 0;

// Whether `point` was recorded before this process was forked, given the boundary `first`.
bool recorded_before(const StreamPoint& point, std::uint64_t first) noexcept {
  return point.recorder != 0 && point.recorder < first;
}

// This thread's number, never given to another thread. It tells apart the per-thread default
// streams that share the handle cudaStreamPerThread, and stamps this thread's records. (A
// thread_local's address would not do: a thread started after another ended may get the same
// address, and its per-thread stream would pass for the ended thread's, whose work may still run.)
std::uint64_t this_thread_number() noexcept {
  RecordClock& clock = record_clock;
  if (clock.recorder == 0) {
    clock.recorder = next_recorder.fetch_add(1, std::memory_order_relaxed);
  }
  return clock.recorder;
}

cudaError_t device_of_explicit_stream(cudaStream_t stream, int& device,
                                      std::uint64_t& stream_id) noexcept {
  const CudaApi& api = cuda();
  const std::uint64_t id = id_of_explicit_stream(stream);
  if (id == 0) {
    return api.stream_get_device(stream, &device);  // no id: the point stands alone
  }
  // Fibonacci hashing: ids may be sequential numbers or addresses, and spread either way.
  DeviceOfStream& known =
      devices_of_streams[(id * 0x9e3779b97f4a7c15ull) >> (64 - kRememberedStreamBits)];
  if (known.id != id || known.api != &api) {
    if (const cudaError_t status = api.stream_get_device(stream, &device); status != cudaSuccess) {
      return status;
    }
    known = DeviceOfStream{id, device, &api};
  }
  device = known.device;
  stream_id = id;
  return cudaSuccess;
}

// This thread's stamp for its next record.
RecordStamp next_stamp() noexcept {
  const std::uint64_t recorder = this_thread_number();
  return RecordStamp{recorder, ++record_clock.order};
}

}  // namespace

// The release thread's current device. A query made with another device current would create
// that device's primary context on the thread's behalf, even in a process that never uses it.
// The device remembered belongs to the CUDA table that set it (tests swap tables).
void use_device_on_release_thread(int device) noexcept {
  thread_local int current = -1;
  thread_local const CudaApi* current_api = nullptr;
  const CudaApi& api = cuda();
  // A failure is not left as this thread's last error for the next deleter's own check.
  if ((current != device || current_api != &api) && succeeded_or_cleared(api.set_device(device))) {
    current = device;
    current_api = &api;
  }
}

expected<StreamLocation, Error> locate_stream(cudaStream_t stream) noexcept {
  // Capture is checked first: most other calls on a capturing stream (cudaStreamGetDevice among
  // them) are unsupported there and would invalidate the caller's capture.
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaError_t status = cuda().stream_is_capturing(stream, &capture); status != cudaSuccess) {
    return tl::unexpected<Error>(cuda_error(status, "cudaStreamIsCapturing"));
  }
  if (capture != cudaStreamCaptureStatusNone) {
    return tl::unexpected<Error>(
        make_error(ErrorCode::kNotImplemented,
                   "stream is capturing a CUDA graph: its points cannot be tracked"));
  }
  // The fields are gathered apart and the location built in place at the end (see
  // StreamLocation::point for why).
  int device = -1;
  std::uintptr_t thread_key = 0;
  std::uint64_t stream_id = 0;
  if (is_default_stream_handle(stream)) {
    if (cudaError_t status = cuda().get_device(&device); status != cudaSuccess) {
      return tl::unexpected<Error>(cuda_error(status, "cudaGetDevice"));
    }
    if (stream == cudaStreamPerThread) {
      thread_key = static_cast<std::uintptr_t>(this_thread_number());
    }
  } else if (cudaError_t status = device_of_explicit_stream(stream, device, stream_id);
             status != cudaSuccess) {
    return tl::unexpected<Error>(cuda_error(status, "cudaStreamGetDevice"));
  }
  return expected<StreamLocation, Error>(tl::in_place, device, thread_key, stream_id);
}

std::uint64_t id_of_explicit_stream(cudaStream_t stream) noexcept {
  unsigned long long id = 0;
  if (cuda().stream_get_id(stream, &id) != cudaSuccess) {
    (void)cuda().get_last_error();
    return 0;
  }
  return id;
}

// No device switch: CUDA records an event of the stream's own device with any device current
// (asked on the H200s by benchmarks/cuda_semantics_probe.cpp), and the point's event is of the
// stream's device. The caller's current device is never touched.
expected<void, Error> record_point(StreamPoint& point, cudaStream_t stream) noexcept {
  if (cudaError_t status = cuda().event_record(point.event, stream); status != cudaSuccess) {
    return tl::unexpected<Error>(cuda_error(status, "cudaEventRecord"));
  }
  const RecordStamp stamp = next_stamp();
  point.recorder = stamp.recorder;
  point.order = stamp.order;
  return {};
}

RecordStamp record_event(cudaEvent_t event, cudaStream_t stream) noexcept {
  if (cudaError_t status = cuda().event_record(event, stream); status != cudaSuccess) {
    // cuda_error clears the thread's last error, as there.
    note_point_failure(cuda_error(status, "cudaEventRecord"));
    return RecordStamp{};
  }
  return next_stamp();
}

namespace {

// Trivially destructible, so that a point recorded while the thread ends (a Tensor dropped by
// another thread_local's destructor) never writes into a destroyed object; written only on a
// failure. A longer message is cut.
struct NotedFailure {
  bool noted = false;
  ErrorCode code = ErrorCode::kFailure;
  std::uint64_t provenance = 0;
  char message[256] = {};
};
thread_local NotedFailure point_failure{};

}  // namespace

void note_point_failure(Error error) noexcept {
  NotedFailure& noted = point_failure;
  noted.noted = true;
  noted.code = error.code;
  noted.provenance = error.provenance;
  const std::size_t length = std::min(error.message.size(), sizeof(noted.message) - 1);
  std::memcpy(noted.message, error.message.data(), length);
  noted.message[length] = '\0';
}

Error take_point_failure() noexcept {
  NotedFailure& noted = point_failure;
  if (!std::exchange(noted.noted, false)) {
    return Error{};
  }
  Error error = make_error(noted.code, noted.message);
  error.provenance = noted.provenance;
  return error;
}

bool recorded_in_another_process(const StreamPoint& point) noexcept {
  return recorded_before(point, first_recorder_of_this_process.load(std::memory_order_relaxed));
}

bool forked_from_another_process() noexcept {
  return first_recorder_of_this_process.load(std::memory_order_relaxed) != 0;
}

namespace {

// Whether `status` is CUDA refusing a call because a stream capture is under way (this thread's,
// or another's begun in global mode): it says nothing about the GPU's progress.
bool refused_by_a_capture(cudaError_t status) noexcept {
  return status == cudaErrorStreamCaptureUnsupported || status == cudaErrorStreamCaptureImplicit ||
         status == cudaErrorStreamCaptureInvalidated;
}

// Asks until `point` passes, for a wait that a capture refused; false when its record turns out
// to be captured (see wait_and_drop_points), or when the refusals outlast kRefusalPatience: a
// capture this very thread began in global mode (its switch to relaxed mode failed) refuses
// every ask until this thread ends it, which it never would from here. The memory is kept then.
bool query_until_passed(const StreamPoint& point) noexcept {
  constexpr std::chrono::seconds kRefusalPatience{2};
  const auto give_up = std::chrono::steady_clock::now() + kRefusalPatience;
  for (;;) {
    const cudaError_t status = cuda().event_query(point.event);
    if (status == cudaSuccess) {
      return true;
    }
    if (status != cudaErrorNotReady) {
      (void)cuda().get_last_error();
      if (status == cudaErrorCapturedEvent) {
        return false;
      }
      if (!refused_by_a_capture(status)) {
        return true;  // the context is gone or broken: nothing runs on it any more
      }
      if (std::chrono::steady_clock::now() >= give_up) {
        return false;
      }
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

}  // namespace

bool point_completed(const StreamPoint& point) noexcept {
  // Recorded by the parent before a fork(): its event cannot be asked here (the query fails, and
  // a failure below would count as passed while the parent's GPU may still use the memory).
  if (recorded_in_another_process(point)) {
    return false;
  }
  const cudaError_t status = cuda().event_query(point.event);
  if (status == cudaSuccess) {
    return true;
  }
  if (status == cudaErrorNotReady) {
    return false;
  }
  (void)cuda().get_last_error();
  // A capture forbids the query, it says nothing about the GPU: ask again later. Any other
  // failure: the context is gone or broken (sticky error, runtime unloading), no more work will
  // run on it, so nothing can still be using the memory.
  return !refused_by_a_capture(status) && status != cudaErrorCapturedEvent;
}

RelaxedCaptureScope::RelaxedCaptureScope() noexcept {
  mode_ = cudaStreamCaptureModeRelaxed;
  changed_ = succeeded_or_cleared(cuda().thread_exchange_stream_capture_mode(&mode_));
}

RelaxedCaptureScope::~RelaxedCaptureScope() {
  if (changed_) {
    (void)succeeded_or_cleared(cuda().thread_exchange_stream_capture_mode(&mode_));
  }
}

bool drop_completed_points(StreamPointList& points, QueryThread thread) noexcept {
  // Nothing to ask: no CUDA call at all (a host pool's block is reused without touching CUDA,
  // whose first call in a process may set the runtime up for a third of a second).
  if (points.empty()) {
    return true;
  }
  // The release thread runs in relaxed mode for good; a caller's thread is put there for this.
  std::optional<RelaxedCaptureScope> relaxed;
  if (thread == QueryThread::kCaller) {
    relaxed.emplace();
  }
  for (std::size_t i = points.size(); i-- > 0;) {
    if (thread == QueryThread::kRelease) {
      use_device_on_release_thread(points[i].device);
    }
    if (point_completed(points[i])) {
      release_event(points[i].device, points[i].event);
      points.swap_remove(i);
    }
  }
  return points.empty();
}

bool drop_points_until(StreamPointList& points, std::chrono::steady_clock::time_point deadline,
                       std::chrono::microseconds rest) noexcept {
  while (!drop_completed_points(points)) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      return false;
    }
    std::this_thread::sleep_for(
        std::min<std::chrono::steady_clock::duration>(rest, deadline - now));
  }
  return true;
}

bool forget_points_of_another_process(StreamPointList& points) noexcept {
  const std::uint64_t first = first_recorder_of_this_process.load(std::memory_order_relaxed);
  if (first == 0) {
    return false;  // not a forked child: every point is this process's
  }
  bool foreign = false;
  for (std::size_t i = 0; i < points.size() && !foreign; ++i) {
    foreign = recorded_before(points[i], first);
  }
  if (!foreign) {
    return false;
  }
  // This process's own events go back to its pools (a pooled event may be recorded again while
  // earlier work on it runs); the parent's are forgotten, never pooled: they are the parent's.
  for (std::size_t i = 0; i < points.size(); ++i) {
    if (!recorded_before(points[i], first)) {
      release_event(points[i].device, points[i].event);
    }
  }
  points.clear();
  return true;
}

bool wait_and_drop_points(StreamPointList& points, QueryThread thread) noexcept {
  // A wait on the parent's event cannot work here: such a release is dropped, not waited for.
  if (forget_points_of_another_process(points)) {
    return false;
  }
  RelaxedCaptureScope relaxed;
  for (std::size_t i = 0; i < points.size(); ++i) {
    if (thread == QueryThread::kRelease) {
      use_device_on_release_thread(points[i].device);
    }
    const cudaError_t status = cuda().event_synchronize(points[i].event);
    if (status == cudaSuccess) {
      continue;
    }
    (void)cuda().get_last_error();
    if (status == cudaErrorCapturedEvent) {
      // Its record went into a graph being captured, which may run at any later time: no wait
      // or query will see it pass, so the memory must stay (the caller keeps it).
      release_points(points);
      return false;
    }
    // Another thread's capture forbade the wait (this thread could not leave global mode), which
    // says nothing about the GPU: asked again until the point passes. Any other failure: the
    // context is gone or broken, and no more work runs on it.
    if (refused_by_a_capture(status) && !query_until_passed(points[i])) {
      release_points(points);
      return false;
    }
  }
  release_points(points);
  return true;
}

void release_points(StreamPointList& points) noexcept {
  for (std::size_t i = 0; i < points.size(); ++i) {
    release_event(points[i].device, points[i].event);
  }
  points.clear();
}

}  // namespace holoscan::detail
