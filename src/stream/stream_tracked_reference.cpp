#include "holoscan/stream_tracked_reference.hpp"

#include "stream/defer_release.hpp"
#include "stream/stream_point.hpp"

namespace holoscan {

void StreamTrackedReference::release_when_safe(ReleaseFunction release, void* context) noexcept {
  // Both roles are waited for: the consumers' deallocation points, and the producer's readiness
  // point, in case the memory is dropped before anyone consumed it while the producer still writes.
  // The caller never queries them: an event query costs more than the record that made it (about
  // 1.3 us on the H200) and would contend with the caller's next launches for the driver, so the
  // release thread decides, for many releases at once.
  if (streams_.holds_points()) {
    detail::StreamPointList points = streams_.take_release_points();
    if (!points.empty()) {
      detail::defer_release(std::move(points), release, context);
      return;
    }
  }
  if (release != nullptr) {
    release(context);
  }
}

}  // namespace holoscan
