#pragma once
// Owners the library made that live by their holds: the shared owner's (a shared_ptr whose
// deleter gives it back) and each export's. An export then keeps such an owner alive with the one
// atomic its claim costs, instead of a claim and a shared_ptr copy; the last hold given back
// destroys it. The holds count in the bits of StreamTrackedReference's claim word above its
// handle claims, so no unpaired release can take one. No CUDA header: the Python binding reads
// the holds too.
#include <atomic>
#include <cstdint>

#include "holoscan/stream_tracked_reference.hpp"

namespace holoscan::detail {

/** @brief The holds of a StreamTrackedReference that lives by them. */
struct HOLOSCAN_DLPACK_ABI ReferenceHolds {
  /** @brief An export's hold in a reference's count, above its handle claims. */
  static constexpr std::int64_t kHold = StreamTrackedReference::kHold;
  /** @brief The shared owner's hold, above every export's. */
  static constexpr std::int64_t kOwnerHold = StreamTrackedReference::kOwnerHold;
  /** @brief Signature of what destroys an owner that lives by its holds and frees its memory. */
  using Dispose = void (*)(StreamTrackedReference* self) noexcept;

  /**
   * @brief Makes a reference just built, which no other thread can reach yet, live by its holds:
   *        one now (its shared owner's, given back by DropHold), one per export (hold()); the
   *        last one given back runs `dispose`, whatever claims are left. An export then keeps the
   * owner alive with the one atomic its claim costs, instead of a claim and a shared_ptr copy.
   * Handle claims count apart, so no unpaired release can take a hold.
   */
  static void live_by_holds(StreamTrackedReference& reference, Dispose dispose) noexcept {
    reference.dispose_ = dispose;
    reference.claims_.store(kOwnerHold, std::memory_order_relaxed);
  }
  /**
   * @brief Holds that are no shared owner's (exports'): what keeps `reference` alive beyond its
   *        shared_ptr. 0 for a reference that does not live by its holds.
   */
  static std::int64_t export_holds(const StreamTrackedReference& reference) noexcept {
    return StreamTrackedReference::export_holds_in(
        reference.claims_.load(std::memory_order_acquire));
  }
  /** @brief One more hold on a reference that lives by them (the holder reaches it already). */
  static void hold(StreamTrackedReference& reference) noexcept {
    reference.claims_.fetch_add(kHold, std::memory_order_relaxed);
  }
  /** @brief Gives an export's hold back; the last hold disposes of the reference. */
  static void drop_hold(StreamTrackedReference& reference) noexcept { drop(reference, kHold); }
  /** @brief A shared_ptr deleter that gives back the shared owner's hold. */
  struct DropHold {
    /** @brief Gives back the hold of the shared owner of `reference`. */
    void operator()(StreamTrackedReference* reference) const noexcept {
      // With the last shared_ptr gone no new hold can be taken (an export needs a Tensor or a
      // context, which hold the shared_ptr), so no export seen now means none ever again:
      // dispose without a read-modify-write. acquire: every export's drop happened before.
      if (export_holds(*reference) == 0) {
        reference->dispose_(reference);
        return;
      }
      drop(*reference, kOwnerHold);
    }
  };

 private:
  static void drop(StreamTrackedReference& reference, std::int64_t hold) noexcept {
    // acq_rel: the one that disposes sees every write made under the other holds and claims.
    const std::int64_t after = reference.claims_.fetch_sub(hold, std::memory_order_acq_rel) - hold;
    // The last hold disposes whatever claims are left: a claim never kept an owner alive (a
    // holder that replaced the context's reference may never give its Tensor's claim back here).
    if (after - static_cast<std::int32_t>(after) == 0) {
      reference.dispose_(&reference);
    }
  }
};

}  // namespace holoscan::detail
