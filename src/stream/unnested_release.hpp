#pragma once
// Releases that set off releases: an owner's release runs its producer's deleter, which may drop
// the last hold on another owner of the library (its memory was an export of ours: a chain of
// round trips through DLPack), whose release runs inline too. Past a few levels the nested ones
// wait on the thread for the one running, so that a chain of any length unwinds in a loop rather
// than in a nest of stack frames per link, which overflowed the stack.
#include "stream/defer_release.hpp"
#include "wing_api.hpp"

namespace holoscan::detail {

/**
 * @brief Runs `release(context)` (never null) on this thread before returning to the outermost
 *        release of the thread: at once when fewer than kInlineReleaseDepth releases are running
 *        on the thread, otherwise after the innermost of those returns. Allocation-free unless
 *        many nested releases wait at once; without memory for one, it runs at once.
 */
HOLOSCAN_DLPACK_WING_API void run_release_unnested(ReleaseFunction release, void* context) noexcept;

/**
 * @brief At exit, on the exiting thread: runs the releases waiting there for a level that exit()
 *        left and will never return to, and lets later releases of the thread run at once.
 */
HOLOSCAN_DLPACK_WING_API void run_releases_waiting_at_exit() noexcept;

/** @brief Releases running at once on one thread before later nested ones wait. */
inline constexpr int kInlineReleaseDepth = 16;

}  // namespace holoscan::detail
