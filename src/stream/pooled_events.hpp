#pragma once
// Per-device pools of untimed events: created once, recycled forever, never destroyed, so that no
// event is destroyed after the CUDA runtime has been torn down at process exit.
#include "cuda/cuda_api.hpp"

#include "holoscan/expected.hpp"
#include "holoscan/export.hpp"

namespace holoscan::detail {

/** @brief Devices the pools can serve (device ids 0 .. kMaxPoolDevices - 1). */
inline constexpr int kMaxPoolDevices = 64;

/** @brief A free event of `device`, created (under a device guard) only when none is free. */
expected<cudaEvent_t, Error> acquire_event(int device) noexcept;

/** @brief Gives `event` back to the pool of `device`; never allocates after warm-up. */
HOLOSCAN_DLPACK_ABI void release_event(int device, cudaEvent_t event) noexcept;

/**
 * @brief Destroys every pooled event not in use, through the CUDA table in use, and forgets it.
 *
 * For tests that swap the CUDA table: pooled events are handles of the table that created them.
 * Returns how many events are still held by owners (and so still counted as created).
 */
HOLOSCAN_DLPACK_ABI std::size_t destroy_free_events() noexcept;

}  // namespace holoscan::detail
