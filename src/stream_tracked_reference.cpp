#include "holoscan/stream_tracked_reference.hpp"

#include "deferred_release.hpp"
#include "stream_point.hpp"

namespace holoscan {

void StreamTrackedReference::release_when_safe(ReleaseFunction release, void* context) noexcept {
  // Both roles are waited for: the consumers' deallocation points, and the producer's readiness
  // point, in case the memory is dropped before anyone consumed it while the producer still writes.
  if (streams_.holds_points()) {
    detail::StreamPointList points = streams_.take_release_points();
    if (!detail::drop_completed_points(points)) {
      detail::defer_release(std::move(points), release, context);
      return;
    }
  }
  if (release != nullptr) {
    release(context);
  }
}

}  // namespace holoscan
