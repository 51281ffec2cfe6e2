#pragma once
/**
 * @file
 * @brief Control of the deleters the library defers until the GPU has passed their streams.
 *
 * Deferred releases run on one library thread. At process exit (an atexit handler) that thread
 * runs every release still pending as the GPU passes it, for at most HOLOSCAN_DLPACK_EXIT_DRAIN_MS
 * milliseconds (default 5000; decimal digits only, clamped to 0-86400000, anything else ignored,
 * with one line on stderr); past that it prints one line to stderr and leaves the rest un-run,
 * so that a deleter waiting for a lock the exiting thread holds cannot hang the exit. An owner
 * dropped after the drain (one in static storage, destroyed after the atexit handlers) waits on
 * its own thread for the GPU, but only until the drain's deadline; a release still pending then
 * is left un-run (its memory leaks; one line on stderr for the first). A deleter
 * may itself call exit(): the other pending releases still run, on a fresh thread. In a child of
 * fork() the releases inherited from the parent are never run (the parent runs them): the child
 * cannot use the parent's CUDA context, so their GPU work cannot be queried there and a deleter
 * of device memory would call into an unusable runtime; flush_deferred_releases() drops them.
 */
#include <chrono>
#include <cstddef>
#include <cstdint>

#include "holoscan/expected.hpp"

#include "holoscan/export.hpp"

namespace holoscan {

/**
 * @brief How the release thread polls the GPU, and how long the exit drain may wait for it.
 *
 * Precedence, field by field: an environment variable that holds a valid value
 * (HOLOSCAN_DLPACK_RELEASE_POLL_US, HOLOSCAN_DLPACK_EXIT_DRAIN_MS,
 * HOLOSCAN_DLPACK_RELEASE_BACKLOG), then the value set from code
 * with set_release_thread_options(), then the defaults below. The environment is read when the
 * release thread starts, when options are set, when they are asked for, and (exit drain) when the
 * drain begins; the poll interval applies from the thread's next polling round, the backlog limit
 * from the next drop.
 */
struct HOLOSCAN_DLPACK_API ReleaseThreadOptions {
  /**
   * @brief The shortest rest between two polling rounds while releases are pending (1 us to 1 s;
   *        default 50 us): how soon a release runs after the GPU passed it, against how often the
   *        thread asks the driver. The thread never polls more often than this; without progress
   *        its rest grows up to the larger of 1 ms and this, with nothing pending up to the larger
   *        of 20 ms and this. While flush_deferred_releases() waits, it polls at least every 20 us.
   */
  std::chrono::microseconds poll_interval{50};
  /** @brief The longest the exit drain waits for pending releases (0 to 24 h; default 5 s). */
  std::chrono::milliseconds exit_drain{5000};
  /**
   * @brief How far the release thread may fall behind (0 to 100000 releases; 0: no limit;
   *        default 4096): releases queued that it has not yet found waiting for the GPU nor run.
   *
   * Past it, a thread that drops an owner wakes the release thread and waits for it (never on
   * the release thread itself), until half the limit is left or for at most 1 ms a drop, so that
   * threads dropping faster than one thread runs deleters cannot grow the queue and its events
   * without bound. Releases waiting for the GPU never count: a drop never waits for the GPU.
   */
  std::size_t backlog_limit{4096};
};

/**
 * @brief Sets the release thread's options from code (environment variables still override).
 *
 * kInvalidArgument, naming the field, with nothing changed, when a value is out of its range
 * (kResourceExhausted when the heap refuses even that message). Never throws.
 * New options apply at once: a rest of the release thread under way ends, the next uses them.
 */
HOLOSCAN_DLPACK_API expected<void, Error> set_release_thread_options(
    const ReleaseThreadOptions& options);

/** @brief The options in effect: the environment's, else those set from code, else defaults. */
HOLOSCAN_DLPACK_API ReleaseThreadOptions release_thread_options() noexcept;

/**
 * @brief Blocks until every release deferred before this call has run, and every release their
 *        deleters deferred in turn (a pool's memory, freed as the export of its last block goes).
 *
 * For tests and shutdown. Returns at once when called from a deleter on the release thread. Do
 * not call it while holding a lock that a deferred deleter takes (for example a Python deleter
 * that needs the GIL while the caller holds it). The exit drain is bounded in time (see above);
 * this call is not.
 */
HOLOSCAN_DLPACK_API void flush_deferred_releases() noexcept;

/**
 * @brief flush_deferred_releases(), for at most `limit`: true once every release deferred before
 *        the call has run, with those their deleters deferred in turn (or the exit drain, over,
 *        left it un-run for good), false when `limit`
 *        passed first or when called from a deleter on the release thread. A bounded wait for
 *        shutdown paths that must not hang on a GPU that never finishes.
 */
HOLOSCAN_DLPACK_API bool flush_deferred_releases_for(std::chrono::milliseconds limit) noexcept;

/** @brief Releases queued and not yet run (a forked child counts the parent's until flushed). */
HOLOSCAN_DLPACK_API std::size_t pending_deferred_releases() noexcept;

/**
 * @brief Releases that failed, run inline or on the release thread: DLPack producer deleters
 *        that threw, and release functions (make_tensor, wrap_memory) that threw or returned an
 *        error.
 *
 * DLPack deleters are C function pointers, but a C++ producer can throw through one. The
 * exception (or the error returned) is contained (the process goes on, the release thread too),
 * the release counts as run (it is never called again; what it did not free leaks) and the
 * failure goes to stderr, one line each for the first 16, then only to this count.
 */
HOLOSCAN_DLPACK_API std::uint64_t failed_releases() noexcept;

}  // namespace holoscan
