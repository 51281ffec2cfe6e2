#include "holoscan/stream_tracked_reference.hpp"

#include "deferred_release.hpp"
#include "stream_point.hpp"

namespace holoscan {

void StreamTrackedReference::release_when_safe(ReleaseFunction release, void* context) noexcept {
  if (streams_.deallocation_point_count() == 0) {  // the common case of a host-only owner
    if (release != nullptr) {
      release(context);
    }
    return;
  }
  detail::StreamPointList points = streams_.take_deallocation_points();
  if (detail::drop_completed_points(points)) {
    if (release != nullptr) {
      release(context);
    }
    return;
  }
  detail::defer_release(std::move(points), release, context);
}

}  // namespace holoscan
