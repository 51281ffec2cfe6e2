#include "deferred_release.hpp"

#include <utility>

#include "holoscan/deferred_release.hpp"
#include "release_queue.hpp"
#include "stream_point.hpp"

namespace holoscan::detail {

void defer_release(StreamPointList points, ReleaseFunction release, void* context) noexcept {
  PendingRelease pending{std::move(points), release, context, 0, false};
  if (ReleaseQueue::instance().push(std::move(pending))) {
    return;
  }
  // The queue could not take it (out of memory, or the process is exiting): wait here rather
  // than release memory the GPU may still use.
  wait_and_drop_points(pending.points);
  if (release != nullptr) {
    release(context);
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
