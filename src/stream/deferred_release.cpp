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
#include "stream/unnested_release.hpp"

namespace holoscan::detail {
namespace {

// After the exit drain no thread runs releases, and an owner in static storage is destroyed on
// the exiting thread: it waits here for the GPU, but no later than the drain would have. Past
// that the release is left un-run (the memory and its events leak; the process is ending), since
// a GPU that never finishes would otherwise hang the exit.
void release_after_the_exit_drain(StreamPointList& points, ReleaseFunction release, void* context,
                                  std::chrono::steady_clock::time_point deadline) noexcept {
  if (forget_points_of_another_process(points)) {
    return;  // the parent's points (a forked child): never waited for, the release never run here
  }
  const auto rest =
      std::min<std::chrono::microseconds>(poll_interval_in_effect(), std::chrono::milliseconds(1));
  if (drop_points_until(points, deadline, rest)) {
    if (release != nullptr) {
      run_release_unnested(release, context);  // a chain's links each come here: see there
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

}  // namespace

void defer_release(StreamPointList&& points, ReleaseFunction release, void* context) noexcept {
  ReleaseQueue& queue = ReleaseQueue::instance();
  switch (queue.push(points, release, context)) {
    case ReleaseQueue::PushResult::kQueued:
      return;
    case ReleaseQueue::PushResult::kClosed:
      release_after_the_exit_drain(points, release, context, queue.drain_deadline());
      return;
    case ReleaseQueue::PushResult::kNoRoom:
      break;
  }
  // Out of memory, or no thread: wait here rather than release memory the GPU may still use.
  // Points the parent recorded before a fork() cannot be waited for: the release is dropped.
  if (wait_and_drop_points(points) && release != nullptr) {
    run_release_unnested(release, context);  // a chain's links each come here: see there
  }
}

}  // namespace holoscan::detail

namespace holoscan {

void flush_deferred_releases() noexcept {
  if (detail::ReleaseQueue* queue = detail::ReleaseQueue::existing()) {
    queue->flush();
  }
}

bool flush_deferred_releases_for(std::chrono::milliseconds limit) noexcept {
  detail::ReleaseQueue* queue = detail::ReleaseQueue::existing();
  // A century at most: a limit of milliseconds::max() would overflow the deadline.
  constexpr std::chrono::milliseconds kLongest = std::chrono::hours(24 * 365 * 100);
  return queue == nullptr ||
         queue->flush_until(std::chrono::steady_clock::now() +
                            std::clamp(limit, std::chrono::milliseconds::zero(), kLongest));
}

std::size_t pending_deferred_releases() noexcept {
  detail::ReleaseQueue* queue = detail::ReleaseQueue::existing();
  return queue != nullptr ? queue->outstanding() : 0;
}

}  // namespace holoscan
