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
  /**
   * @brief Exports' holds a reference takes at most; one more export holds the shared owner and a
   *        claim instead. Half the room below kOwnerHold, so that threads passing the limit
   *        together never carry into the shared owner's hold.
   */
  static constexpr std::int64_t kMaxExportHolds = kOwnerHold / kHold / 2;
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
   * @brief Gives a reference that lives by its holds, and is lent anew (a pool block's), its
   *        shared owner's hold back, for the shared_ptr about to be made: none of its last life's
   *        holds is left (the lender checked: no claim, no name). The last DropHold may have left
   *        that hold in place (it disposes without a read-modify-write), so it is added only when
   *        missing; a concurrent unpaired release's borrow is undone before the bit is read.
   */
  static void hold_again(StreamTrackedReference& reference) noexcept {
    if ((holds_in(reference.claims_.load(std::memory_order_relaxed)) & kOwnerHold) == 0) {
      reference.claims_.fetch_add(kOwnerHold, std::memory_order_relaxed);
    }
  }
  /** @brief Whether `reference` lives by its holds (live_by_holds made it so). */
  static bool lives_by_holds(const StreamTrackedReference& reference) noexcept {
    return reference.dispose_ != nullptr;
  }
  /**
   * @brief Holds that are no shared owner's (exports'): what keeps `reference` alive beyond its
   *        shared_ptr. 0 for a reference that does not live by its holds.
   */
  static std::int64_t export_holds(const StreamTrackedReference& reference) noexcept {
    return StreamTrackedReference::export_holds_in(
        reference.claims_.load(std::memory_order_acquire));
  }
  /**
   * @brief One more hold on a reference that lives by them, which the caller reaches through its
   *        shared owner; false, nothing taken, when kMaxExportHolds are held already.
   */
  static bool try_hold(StreamTrackedReference& reference) noexcept {
    const std::int64_t before = reference.claims_.fetch_add(kHold, std::memory_order_relaxed);
    if (StreamTrackedReference::export_holds_in(before) < kMaxExportHolds) {
      return true;
    }
    // Never the last hold: the caller's shared owner holds one.
    reference.claims_.fetch_sub(kHold, std::memory_order_relaxed);
    return false;
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
      if (holds_in(reference->claims_.load(std::memory_order_acquire)) == kOwnerHold) {
        reference->dispose_(reference);
        return;
      }
      drop(*reference, kOwnerHold);
    }
  };

 private:
  // The holds in a value of the claim word: its claims (signed) taken off, which also undoes an
  // unpaired release's borrow from the holds.
  static constexpr std::int64_t holds_in(std::int64_t word) noexcept {
    return word - static_cast<std::int32_t>(word);
  }

  static void drop(StreamTrackedReference& reference, std::int64_t hold) noexcept {
    // acq_rel: the one that disposes sees every write made under the other holds and claims.
    const std::int64_t after = reference.claims_.fetch_sub(hold, std::memory_order_acq_rel) - hold;
    // The last hold disposes whatever claims are left: a claim never kept an owner alive (a
    // holder that replaced the context's reference may never give its Tensor's claim back here).
    if (holds_in(after) == 0) {
      reference.dispose_(&reference);
    }
  }
};

}  // namespace holoscan::detail
