#pragma once
/**
 * @file
 * @brief Warm-up and inspection of the per-device pools of untimed CUDA events.
 */
#include <cstddef>

#include "holoscan/detail/abi.hpp"
#include "holoscan/expected.hpp"

namespace holoscan {

/** @brief Creates pooled events on `device` until at least `count` exist (warm-up). */
expected<void, Error> reserve_stream_events(int device, std::size_t count);

/** @brief Events the pool of `device` has created so far (they are never destroyed). */
HOLOSCAN_DLPACK_ABI std::size_t created_stream_events(int device) noexcept;

}  // namespace holoscan
