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

/** @brief Events the pool of `device` has created so far (they are never destroyed). */
HOLOSCAN_DLPACK_API std::size_t created_stream_events(int device) noexcept;

}  // namespace holoscan
