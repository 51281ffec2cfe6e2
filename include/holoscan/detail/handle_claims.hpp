#pragma once
/**
 * @file
 * @brief Lock-free count of live Tensor-handle claims that refuses to wrap below zero.
 */
#include <atomic>
#include <cstdint>

#include "holoscan/detail/abi.hpp"

namespace holoscan::detail {

/** @brief One atomic per retain or release; an unpaired release is counted, never wrapped. */
class HOLOSCAN_DLPACK_ABI HandleClaims {
 public:
  /** @brief Adds one claim. */
  void retain() noexcept { count_.fetch_add(1, std::memory_order_relaxed); }

  /** @brief Drops one claim; returns false (and counts it) when no claim was held. */
  bool release() noexcept {
    // acq_rel: whoever sees the count reach zero also sees every write made under the claims.
    if (count_.fetch_sub(1, std::memory_order_acq_rel) > 0) {
      return true;
    }
    count_.fetch_add(1, std::memory_order_relaxed);
    unpaired_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }

  /** @brief Claims held now (never negative, even during an unpaired release's correction). */
  std::int64_t count() const noexcept {
    const std::int64_t claims = count_.load(std::memory_order_acquire);
    return claims > 0 ? claims : 0;
  }
  /** @brief Releases that found no claim to drop. */
  std::uint64_t unpaired_releases() const noexcept {
    return unpaired_.load(std::memory_order_relaxed);
  }

 private:
  std::atomic<std::int64_t> count_{0};
  std::atomic<std::uint64_t> unpaired_{0};
};

}  // namespace holoscan::detail
