#pragma once
// The two fields of an exported DLPack tensor that a stale pointer (a consumer's second deleter
// call, or an import after the deleter ran) may read at any time: its deleter and manager_ctx.
// Exports whose owners' memory is kept for good (kept_blocks.hpp) write and take them here,
// atomically, so that of two deleter calls one runs and the other is reported.
#include "dlpack/producer_deleter.hpp"

namespace holoscan::detail {

/** @brief Hands out `managed` with `deleter` and `owner`: the owner stored last, once the export
 *         is whole (a stale pointer reads null until then). */
template <class Managed>
void publish_export_owner(Managed& managed, void (*deleter)(Managed*), void* owner) noexcept {
  __atomic_store_n(&managed.deleter, deleter, __ATOMIC_RELAXED);
  __atomic_store_n(&managed.manager_ctx, owner, __ATOMIC_RELEASE);
}

/** @brief The owner a deleter call was given, taken in one exchange: null (reported and counted
 *         in failed_releases()) for a second call, also one made at once on another thread. */
template <class Managed>
void* take_export_owner(Managed& managed) noexcept {
  void* owner = __atomic_exchange_n(&managed.manager_ctx, nullptr, __ATOMIC_ACQ_REL);
  if (owner == nullptr) {
    report_ignored_release("an exported DLPack tensor's deleter was called again",
                           "a deleter runs once, and the first call let go of everything");
  }
  return owner;
}

}  // namespace holoscan::detail
