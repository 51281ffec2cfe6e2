#pragma once
/**
 * @file
 * @brief Warm-up and inspection of the per-device pools of untimed CUDA events.
 */
#include <cstddef>

#include "holoscan/expected.hpp"
#include "holoscan/export.hpp"

namespace holoscan {

/** @brief Creates pooled events on `device` until at least `count` exist (warm-up). */
HOLOSCAN_DLPACK_API expected<void, Error> reserve_stream_events(int device, std::size_t count);

/** @brief Events of the pool of `device` that exist now: created and not destroyed by a trim. */
HOLOSCAN_DLPACK_API std::size_t created_stream_events(int device) noexcept;

/**
 * @brief Destroys events of `device`'s pool that no owner uses until at most `keep` exist (or none
 *        is free), and returns how many it destroyed; as `cudaMemPoolTrimTo` does for memory.
 *
 * The pool keeps every event it made (after a burst of pending releases, as many as were waiting
 * for the GPU at once) until asked: call this once the burst is over. Events in use are never
 * touched; hooks running meanwhile are not held up (events are destroyed outside the pool's
 * lock), and make events again if they need more. Not after the CUDA runtime has been unloaded
 * (from a static destructor, say).
 */
HOLOSCAN_DLPACK_API std::size_t trim_stream_events(int device, std::size_t keep = 0) noexcept;

}  // namespace holoscan
