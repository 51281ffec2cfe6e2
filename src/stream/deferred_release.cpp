#include "stream/defer_release.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <utility>

#include "holoscan/deferred_release.hpp"
#include "stream/release_queue.hpp"
#include "stream/release_settings.hpp"
#include "stream/stream_point.hpp"
#include "stream/stream_state.hpp"

namespace holoscan::detail {
namespace {

// After the exit drain no thread runs releases, and an owner in static storage is destroyed on
// the exiting thread: it waits here for the GPU, but no later than the drain would have. Past
// that the release is left un-run (the memory and its events leak; the process is ending), since
// a GPU that never finishes would otherwise hang the exit.
void release_after_the_exit_drain(StreamPointList& points, ReleaseFunction release, void* context,
                                  std::chrono::steady_clock::time_point deadline) noexcept {
  const auto rest =
      std::min<std::chrono::microseconds>(poll_interval_in_effect(), std::chrono::milliseconds(1));
  if (drop_points_until(points, deadline, rest)) {
    if (release != nullptr) {
      release(context);
    }
    return;
  }
  points.clear();
  static std::atomic<bool> reported{false};
  if (!reported.exchange(true)) {
    std::fputs(
        "holoscan-dlpack: a release deferred after the exit drain was still pending at its limit "
        "(HOLOSCAN_DLPACK_EXIT_DRAIN_MS or ReleaseThreadOptions::exit_drain); left un-run, as are "
        "any later ones still pending then\n",
        stderr);
  }
}

// What a push left to the caller: the release after the exit drain, or waited for here.
void release_refused(ReleaseQueue::PushResult result, StreamPointList& points,
                     ReleaseFunction release, void* context) noexcept {
  ReleaseQueue& queue = ReleaseQueue::instance();
  switch (result) {
    case ReleaseQueue::PushResult::kQueued:
      return;
    case ReleaseQueue::PushResult::kClosed:
      release_after_the_exit_drain(points, release, context, queue.drain_deadline());
      return;
    case ReleaseQueue::PushResult::kNoRoom:
      break;
  }
  // Out of memory, or no thread: wait here rather than release memory the GPU may still use.
  wait_and_drop_points(points);
  if (release != nullptr) {
    release(context);
  }
}

}  // namespace

void defer_release(StreamPointList&& points, ReleaseFunction release, void* context) noexcept {
  release_refused(ReleaseQueue::instance().push(points, release, context), points, release,
                  context);
}

void defer_release_of(StreamState& streams, ReleaseFunction release, void* context) noexcept {
  if (!streams.release_points_fit_inline_unshared()) {
    defer_release(streams.take_release_points_unshared(), release, context);
    return;
  }
  // Taken under the intake lock, which is safe there: within the inline room the take neither
  // allocates nor waits.
  const ReleaseQueue::PushResult result = ReleaseQueue::instance().push_taken(
      [](StreamPointList& into, void* from) noexcept {
        static_cast<StreamState*>(from)->take_release_points_into_unshared(into);
      },
      &streams, release, context);
  if (result != ReleaseQueue::PushResult::kQueued) {
    StreamPointList points = streams.take_release_points_unshared();
    release_refused(result, points, release, context);
  }
}

}  // namespace holoscan::detail

namespace holoscan {

void flush_deferred_releases() noexcept {
  if (detail::ReleaseQueue* queue = detail::ReleaseQueue::existing()) {
    queue->flush();
  }
}

std::size_t pending_deferred_releases() noexcept {
  detail::ReleaseQueue* queue = detail::ReleaseQueue::existing();
  return queue != nullptr ? queue->outstanding() : 0;
}

}  // namespace holoscan
