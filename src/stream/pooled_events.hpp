#pragma once
// Per-device pools of untimed events: created once and recycled, destroyed only when the caller
// trims a pool (trim_stream_events), never at exit, so that no event is destroyed after the CUDA
// runtime has been torn down.
#include <array>
#include <cstddef>

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
 * @brief Events of one device on their way back to its pool, given back under one lock per batch
 *        rather than one per event (the release thread returns many per round). Never allocates.
 */
class HOLOSCAN_DLPACK_ABI EventBatch {
 public:
  /** @brief Events given back under one lock at most. */
  static constexpr std::size_t kCapacity = 64;

  EventBatch() = default;
  EventBatch(const EventBatch&) = delete;
  EventBatch& operator=(const EventBatch&) = delete;
  /** @brief Gives back what is left. */
  ~EventBatch() { flush(); }

  /** @brief Adds `event` of `device`; a full batch, or one of another device, is given back first. */
  void add(int device, cudaEvent_t event) noexcept {
    if (count_ == kCapacity || (count_ != 0 && device != device_)) {
      flush();
    }
    device_ = device;
    events_[count_++] = event;
  }
  /** @brief Gives every event added back to its pool, under one lock. */
  void flush() noexcept;

 private:
  int device_ = -1;
  std::size_t count_ = 0;
  std::array<cudaEvent_t, kCapacity> events_{};
};

/**
 * @brief Destroys every pooled event not in use, through the CUDA table in use, and forgets it.
 *
 * For tests that swap the CUDA table: pooled events are handles of the table that created them.
 * Returns how many events are still held by owners (and so still counted as created).
 */
HOLOSCAN_DLPACK_ABI std::size_t destroy_free_events() noexcept;

}  // namespace holoscan::detail
