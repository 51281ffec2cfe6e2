#pragma once
// The owner of an imported DLPack tensor, made so that it lives by its holds
// (ReferenceHolds::live_by_holds): its Tensors' shared_ptr is one hold, each export of it
// another, and the last one destroys it. An export then costs one atomic pair, not two.
#include <memory>
#include <new>

#include "dlpack/recycler.hpp"
#include "holoscan/dl_managed_memory_buffer.hpp"
#include "stream/reference_holds.hpp"
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
    void* memory = Blocks<Buffer>::take();
    if (memory == nullptr) {
      return nullptr;
    }
    // Built empty: should the shared_ptr's own block be refused, its deleter disposes of an owner
    // of nothing, and the producer's tensor stays untouched.
    auto* owner = new (memory) Buffer(nullptr);
    ReferenceHolds::live_by_holds(*owner, &dispose<Buffer>);
    std::shared_ptr<Buffer> shared;
    try {
      shared =
          std::shared_ptr<Buffer>(owner, ReferenceHolds::DropHold{}, RecyclingAllocator<Buffer>{});
    } catch (...) {
      return nullptr;
    }
    owner->self_ = managed;
    // The owner is this thread's alone until the Tensor is returned: its first claim is a store.
    StreamTrackedAccess::claim_first_unshared(*owner);
    return shared;
  }

 private:
  template <class Buffer>
  using Blocks = BlockRecycler<sizeof(Buffer), alignof(Buffer)>;

  template <class Buffer>
  static void dispose(StreamTrackedReference* self) noexcept {
    auto* owner = static_cast<Buffer*>(self);
    owner->~Buffer();  // the producer's deleter, now or once the GPU passed every point
    Blocks<Buffer>::give(owner);
  }
};

}  // namespace holoscan::detail
