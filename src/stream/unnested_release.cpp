#include "stream/unnested_release.hpp"

#include <pthread.h>

#include <atomic>
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

// A release that calls exit() (or a deleter it runs) never returns to the level that runs the
// waiting ones: they run on the exiting thread from the release queue's exit handler, before its
// drain (which then drains what they queued), and from one of their own, registered by the first
// release ever to wait, for a process that never made the queue. Only that thread's list can be
// reached; another thread is still running its chain when the process exits, as any thread is.
std::atomic<bool> exit_handler_registered{false};

void register_exit_handler_once() noexcept {
  if (!exit_handler_registered.load(std::memory_order_relaxed) &&
      !exit_handler_registered.exchange(true, std::memory_order_acq_rel) &&
      std::atexit(run_releases_waiting_at_exit) != 0) {
    exit_handler_registered.store(false, std::memory_order_relaxed);  // tried again next time
  }
}

// A child forked inside a chain inherits the waiting releases of the forking thread: they are the
// parent's to run (their deleters may free device memory, which a child must not touch through
// CUDA), so the child forgets them, as it does the release queue's (see ReleaseQueue).
void forget_waiting_in_child() noexcept {
  NestedReleases& here = nested;
  here.waiting = 0;
  if (here.heap != nullptr) {
    std::free(here.heap);
    here.heap = nullptr;
    here.room = NestedReleases::kInlineRoom;
  }
}

// Registered when the library is loaded, before any thread of the library exists.
[[maybe_unused]] const bool fork_handler_registered =
    pthread_atfork(nullptr, nullptr, forget_waiting_in_child) == 0;

}  // namespace

void run_releases_waiting_at_exit() noexcept {
  NestedReleases& here = nested;
  here.run_waiting();
  // The frames that were running releases never return (exit() was called in one): releases that
  // come later on this thread (static destructors, later exit handlers) run as on a fresh thread,
  // rather than wait for a level that will never run them.
  here.depth = 0;
}

void run_release_unnested(ReleaseFunction release, void* context) noexcept {
  NestedReleases& here = nested;
  if (here.depth >= kInlineReleaseDepth) {
    register_exit_handler_once();
    if (here.push(release, context)) {
      return;
    }
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
