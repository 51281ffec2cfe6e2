#pragma once
// The stream points that a StreamTrackedReference keeps in its in-place storage, and how the
// library reaches them: an inline cast, no call and no indirection.
#include <new>

#include "holoscan/stream_tracked_reference.hpp"
#include "stream/stream_state.hpp"

namespace holoscan::detail {

/** @brief The in-place storage of a StreamTrackedReference, as the StreamState it holds. */
struct HOLOSCAN_DLPACK_ABI StreamTrackedAccess {
  static_assert(sizeof(StreamState) == StreamTrackedReference::kStreamStateBytes,
                "set StreamTrackedReference::kStreamStateBytes to sizeof(StreamState)");
  static_assert(alignof(StreamState) <= 8, "StreamTrackedReference::streams_ is aligned to 8");

  /** @brief The stream points of `reference`. */
  static StreamState& streams(StreamTrackedReference& reference) noexcept {
    return *std::launder(reinterpret_cast<StreamState*>(reference.streams_));
  }
  /** @brief The stream points of `reference`. */
  static const StreamState& streams(const StreamTrackedReference& reference) noexcept {
    return *std::launder(reinterpret_cast<const StreamState*>(reference.streams_));
  }
  /** @brief Where the stream points are built. */
  static void* storage(StreamTrackedReference& reference) noexcept { return reference.streams_; }
  /**
   * @brief Counts the first handle claim of a reference just made, which no other thread can
   *        reach yet: a plain store where retain_tensor_handle() is an atomic read-modify-write.
   */
  static void claim_first_unshared(StreamTrackedReference& reference) noexcept {
    reference.claims_.store(reference.claims_.load(std::memory_order_relaxed) + 1,
                            std::memory_order_relaxed);
  }
  /**
   * @brief Starts the count of unpaired releases over, for a reference lent anew (a pool block's):
   *        an earlier holder's surplus releases are not the new holder's bug.
   */
  static void forget_unpaired_releases(StreamTrackedReference& reference) noexcept {
    reference.unpaired_.store(0, std::memory_order_relaxed);
  }
};

/** @brief The stream points of `reference`. */
inline StreamState& tracked_streams(StreamTrackedReference& reference) noexcept {
  return StreamTrackedAccess::streams(reference);
}
/** @brief The stream points of `reference`. */
inline const StreamState& tracked_streams(const StreamTrackedReference& reference) noexcept {
  return StreamTrackedAccess::streams(reference);
}

}  // namespace holoscan::detail
