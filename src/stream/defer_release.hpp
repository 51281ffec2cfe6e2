#pragma once
// The queue and the thread that run releases once the GPU has passed their deallocation points.
#include "stream/stream_point_list.hpp"
#include "wing_api.hpp"

namespace holoscan::detail {

/** @brief A release action; called exactly once, never under a library lock. */
using ReleaseFunction = void (*)(void* context) noexcept;

/**
 * @brief Runs `release(context)` once every point in `points` has completed, on the release
 *        thread; returns at once (past the backlog limit, after up to 1 ms for the release thread
 *        to catch up). Falls back to waiting here only if the queue cannot grow.
 *        The points are taken (copied once, into the queue); `points` is left empty.
 */
HOLOSCAN_DLPACK_WING_API void defer_release(StreamPointList&& points, ReleaseFunction release,
                                            void* context) noexcept;

}  // namespace holoscan::detail
