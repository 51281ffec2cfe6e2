#include "stream/unnested_release.hpp"

#include <cstddef>
#include <cstdlib>

namespace holoscan::detail {
namespace {

struct WaitingRelease {
  ReleaseFunction release;
  void* context;
};

// The releases running on this thread and those waiting for the innermost inline one. Trivially
// destructible, so that it needs no destructor at thread exit: the heap room is given back as
// soon as the waiting ones are run, which is before the outermost release returns.
struct NestedReleases {
  static constexpr std::size_t kInlineRoom = 16;
  int depth = 0;
  std::size_t waiting = 0;
  std::size_t room = kInlineRoom;
  WaitingRelease* heap = nullptr;  // replaces `kept` once more wait than it holds
  WaitingRelease kept[kInlineRoom];

  WaitingRelease* items() noexcept { return heap != nullptr ? heap : kept; }

  bool push(ReleaseFunction release, void* context) noexcept {
    if (waiting == room && !grow()) {
      return false;
    }
    items()[waiting++] = WaitingRelease{release, context};
    return true;
  }

  bool grow() noexcept {
    const std::size_t larger = 2 * room;
    auto* bigger = static_cast<WaitingRelease*>(
        heap != nullptr ? std::realloc(heap, larger * sizeof(WaitingRelease))
                        : std::malloc(larger * sizeof(WaitingRelease)));
    if (bigger == nullptr) {
      return false;
    }
    if (heap == nullptr) {
      for (std::size_t i = 0; i < waiting; ++i) {
        bigger[i] = kept[i];
      }
    }
    heap = bigger;
    room = larger;
    return true;
  }

  // Runs the waiting releases, last first; those they set off wait here too.
  void run_waiting() noexcept {
    while (waiting > 0) {
      const WaitingRelease next = items()[--waiting];
      next.release(next.context);
    }
    if (heap != nullptr) {
      std::free(heap);
      heap = nullptr;
      room = kInlineRoom;
    }
  }
};

thread_local NestedReleases nested;

}  // namespace

void run_release_unnested(ReleaseFunction release, void* context) noexcept {
  NestedReleases& here = nested;
  if (here.depth >= kInlineReleaseDepth && here.push(release, context)) {
    return;
  }
  ++here.depth;
  release(context);
  // The deepest level that runs at once runs what deeper levels left, at its own depth, so that
  // what those set off waits in turn.
  if (here.depth == kInlineReleaseDepth) {
    here.run_waiting();
  }
  --here.depth;
}

}  // namespace holoscan::detail
