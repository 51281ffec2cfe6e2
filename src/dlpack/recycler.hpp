#pragma once
// Free lists that hand memory back out instead of returning it to malloc, so that the import and
// export paths allocate nothing once warm. Each thread keeps a small list of its own (no lock, no
// atomic on the hot path) backed by one shared list that takes and gives batches under a lock.
// Under AddressSanitizer everything passes straight to the heap, so that a use after free is
// still caught.
//
// fork(): the shared list is only ever try-locked, so a child whose parent forked while another
// thread held the lock gives up on the shared list (and uses the heap) instead of waiting for a
// thread it does not have. Thread exit: a thread's list goes to the shared list (or the heap) as
// the thread ends; a block given back after that, on that thread, goes there directly.
#include <cstddef>
#include <cstdint>
#include <new>

#include "holoscan/export.hpp"
#include "spin_mutex.hpp"

#if defined(__SANITIZE_ADDRESS__)
#define HOLOSCAN_DLPACK_RECYCLE 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HOLOSCAN_DLPACK_RECYCLE 0
#endif
#endif
#ifndef HOLOSCAN_DLPACK_RECYCLE
#define HOLOSCAN_DLPACK_RECYCLE 1
#endif

namespace holoscan::detail {

/**
 * @brief Free objects of one kind (`Kind::release(void*)` frees one for good): a list per thread
 *        in front of a shared one. take() gives null when both are empty; give() frees what
 *        neither has room for.
 */
template <class Kind>
class HOLOSCAN_DLPACK_ABI PointerCache {
 public:
  /** @brief Objects a thread keeps. */
  static constexpr std::uint32_t kLocal = 32;
  /** @brief Objects moved between a thread's list and the shared one at a time. */
  static constexpr std::uint32_t kBatch = kLocal / 2;
  /** @brief Objects the shared list keeps. */
  static constexpr std::uint32_t kShared = 1024;

  /** @brief A kept object, or null. */
  static void* take() noexcept {
#if HOLOSCAN_DLPACK_RECYCLE
    Local& local = local_;
    if (local.count == 0 && local.state != kClosed) {
      refill(local);
    }
    if (local.count > 0) {
      return local.slots[--local.count];
    }
    if (local.state == kClosed) {
      return take_shared();
    }
#endif
    return nullptr;
  }

  /** @brief Keeps `object` (from take() or new) for reuse, or frees it. */
  static void give(void* object) noexcept {
#if HOLOSCAN_DLPACK_RECYCLE
    Local& local = local_;
    if (local.state == kFresh) {
      register_thread(local);
    }
    if (local.state == kOpen) {
      if (local.count == kLocal) {
        spill(local);
      }
      local.slots[local.count++] = object;
      return;
    }
    if (give_shared(&object, 1) == 1) {
      return;
    }
#endif
    Kind::release(object);
  }

 private:
  enum State : std::uint8_t { kFresh, kOpen, kClosed };
  struct Local {
    void* slots[kLocal];
    std::uint32_t count;
    State state;
  };
  struct Shared {
    SpinMutex mutex;
    void* slots[kShared];
    std::uint32_t count;
  };
  // Closes the thread's list as the thread ends.
  struct Closer {
    ~Closer() { close(local_); }
  };

  [[gnu::noinline]] static void register_thread(Local& local) noexcept {
    static thread_local Closer closer;  // its destructor runs as this thread ends
    (void)&closer;
    local.state = kOpen;
  }

  [[gnu::noinline]] static void refill(Local& local) noexcept {
    if (local.state == kFresh) {
      register_thread(local);  // what it takes now goes back to the shared list at its end
    }
    if (!shared_.mutex.try_lock()) {
      return;
    }
    while (local.count < kBatch && shared_.count > 0) {
      local.slots[local.count++] = shared_.slots[--shared_.count];
    }
    shared_.mutex.unlock();
  }

  [[gnu::noinline]] static void spill(Local& local) noexcept {
    const std::uint32_t kept = give_shared(local.slots + (kLocal - kBatch), kBatch);
    for (std::uint32_t i = kLocal - kBatch + kept; i < kLocal; ++i) {
      Kind::release(local.slots[i]);
    }
    local.count = kLocal - kBatch;
  }

  static void close(Local& local) noexcept {
    const std::uint32_t kept = give_shared(local.slots, local.count);
    for (std::uint32_t i = kept; i < local.count; ++i) {
      Kind::release(local.slots[i]);
    }
    local.count = 0;
    local.state = kClosed;
  }

  // Moves up to `count` objects from `objects` to the shared list; returns how many it took.
  static std::uint32_t give_shared(void* const* objects, std::uint32_t count) noexcept {
    if (!shared_.mutex.try_lock()) {
      return 0;
    }
    std::uint32_t taken = 0;
    for (; taken < count && shared_.count < kShared; ++taken) {
      shared_.slots[shared_.count++] = objects[taken];
    }
    shared_.mutex.unlock();
    return taken;
  }

  static void* take_shared() noexcept {
    if (!shared_.mutex.try_lock()) {
      return nullptr;
    }
    void* object = shared_.count > 0 ? shared_.slots[--shared_.count] : nullptr;
    shared_.mutex.unlock();
    return object;
  }

  // Zero-initialized and trivially destructible: usable from the first call to the thread's end.
  static inline thread_local Local local_{};
  // Constant-initialized, never destroyed: objects may come back during static destruction.
  static inline Shared shared_{};
};

/** @brief Blocks of `Size` bytes aligned to `Align`, kept for reuse. */
template <std::size_t Size, std::size_t Align>
class HOLOSCAN_DLPACK_ABI BlockRecycler {
 public:
  /** @brief A block: a kept one, or a new one from the heap; null when the heap refuses. */
  static void* take() noexcept {
    if (void* block = PointerCache<BlockRecycler>::take()) {
      return block;
    }
    return ::operator new (Size, std::align_val_t{Align}, std::nothrow);
  }
  /** @brief Gives `block` (from take()) back. */
  static void give(void* block) noexcept { PointerCache<BlockRecycler>::give(block); }
  /** @brief Frees a block for good (PointerCache's policy). */
  static void release(void* block) noexcept { ::operator delete (block, std::align_val_t{Align}); }
};

/** @brief A standard allocator over BlockRecycler, for std::allocate_shared and friends. */
template <class T>
struct HOLOSCAN_DLPACK_ABI RecyclingAllocator {
  using value_type = T;  ///< What it allocates.

  RecyclingAllocator() noexcept = default;
  /** @brief Rebinding, as every standard allocator allows. */
  template <class U>
  RecyclingAllocator(const RecyclingAllocator<U>&) noexcept {
  }  // NOLINT(google-explicit-constructor)

  /** @brief One object from the recycler; arrays from the heap. */
  T* allocate(std::size_t count) {
    void* memory =
        count == 1 ? BlockRecycler<sizeof(T), alignof(T)>::take()
                   : ::operator new (count * sizeof(T), std::align_val_t{alignof(T)}, std::nothrow);
    if (memory == nullptr) {
      throw std::bad_alloc();
    }
    return static_cast<T*>(memory);
  }
  /** @brief Gives back what allocate() gave. */
  void deallocate(T* memory, std::size_t count) noexcept {
    if (count == 1) {
      BlockRecycler<sizeof(T), alignof(T)>::give(memory);
    } else {
      ::operator delete (memory, std::align_val_t{alignof(T)});
    }
  }
  /** @brief Every RecyclingAllocator can free what another allocated. */
  template <class U>
  bool operator==(const RecyclingAllocator<U>&) const noexcept {
    return true;
  }
  /** @brief See operator==. */
  template <class U>
  bool operator!=(const RecyclingAllocator<U>&) const noexcept {
    return false;
  }
};

}  // namespace holoscan::detail
