#pragma once
// Owners the library makes that live by their holds (ReferenceHolds::live_by_holds): built in a
// recycled block and shared through a shared_ptr whose deleter gives the shared owner's hold back;
// the last hold destroys the owner and gives the block back. An export of what such an owner owns
// then costs one atomic pair, not two.
#include <memory>
#include <new>

#include "dlpack/recycler.hpp"
#include "stream/reference_holds.hpp"

namespace holoscan::detail {

/** @brief Makes owners of class `Owner` (a StreamTrackedReference) that live by their holds. */
template <class Owner>
struct OwnerByHolds {
  /**
   * @brief A shared owner that `build(memory)` makes in place (noexcept: an Owner that owns
   *        nothing yet, which the caller then gives its memory), living by its holds; null when the
   *        heap refuses. A refused shared_ptr disposes of the owner built, which owned nothing.
   */
  template <class Build>
  static std::shared_ptr<Owner> make(Build&& build) noexcept {
    void* memory = Blocks::take();
    if (memory == nullptr) {
      return nullptr;
    }
    Owner* owner = build(memory);
    ReferenceHolds::live_by_holds(*owner, &dispose);
    try {
      return std::shared_ptr<Owner>(owner, ReferenceHolds::DropHold{}, RecyclingAllocator<Owner>{});
    } catch (...) {  // std::bad_alloc
      return nullptr;
    }
  }

 private:
  using Blocks = BlockRecycler<sizeof(Owner), alignof(Owner)>;

  static void dispose(StreamTrackedReference* self) noexcept {
    auto* owner = static_cast<Owner*>(self);
    owner->~Owner();  // its memory's release, now or once the GPU passed every point
    Blocks::give(owner);
  }
};

}  // namespace holoscan::detail
