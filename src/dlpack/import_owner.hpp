#pragma once
// The owner of an imported DLPack tensor, made so that it lives by its holds (OwnerByHolds): its
// Tensors' shared_ptr is one hold, each export of it another, and the last one destroys it.
#include <memory>
#include <new>

#include "dlpack/owner_by_holds.hpp"
#include "holoscan/dl_managed_memory_buffer.hpp"
#include "stream/tracked_streams.hpp"

namespace holoscan::detail {

/** @brief Makes the import owners (a friend of both buffer classes). */
struct HOLOSCAN_DLPACK_ABI ImportOwnerAccess {
  /**
   * @brief A shared owner of `managed` that lives by its holds, with its first handle claim
   *        counted (the Tensor's); null when the heap refuses, and then nothing was taken: the
   *        producer's deleter has not run and `managed` stays the caller's.
   */
  template <class Buffer, class Managed>
  static std::shared_ptr<Buffer> make(Managed* managed) noexcept {
    // Built empty: should the shared_ptr's own block be refused, its deleter disposes of an owner
    // of nothing, and the producer's tensor stays untouched.
    std::shared_ptr<Buffer> shared = OwnerByHolds<Buffer>::make(
        [](void* memory) noexcept { return new (memory) Buffer(nullptr); });
    if (shared == nullptr) {
      return nullptr;
    }
    shared->self_ = managed;
    // The owner is this thread's alone until the Tensor is returned: its first claim is a store.
    StreamTrackedAccess::claim_first_unshared(*shared);
    return shared;
  }
};

}  // namespace holoscan::detail
