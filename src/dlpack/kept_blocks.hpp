#pragma once
// Memory for owners whose address a caller may still use after the owner is gone: a DLPack
// deleter called a second time (its consumer's bug, which the library reports and ignores) reads
// the owner it was given. Once made, a block of such an owner is never freed and never given to
// another kind of object, so that a stale pointer reads what the last owner left there (its
// cleared manager_ctx), never freed memory nor some other object's fields, until a later owner
// of the same kind takes the block (which no memory scheme can tell from the stale pointer's
// own: the consumer's bug then reaches that owner, as tensor.hpp says). Blocks are
// recycled through a thread's list and a shared one (PointerCache, as BlockRecycler's) in front of
// a stack of the rest: the process keeps as many blocks as it ever had owners alive at once.
//
// The stack links its blocks through their first pointer-sized bytes: an owner must leave what a
// stale pointer reads elsewhere in its block.
#include <pthread.h>

#include <atomic>
#include <cstddef>
#include <mutex>
#include <new>

#include "dlpack/recycler.hpp"
#include "holoscan/export.hpp"
#include "spin_mutex.hpp"

#if !HOLOSCAN_DLPACK_RECYCLE  // AddressSanitizer (recycler.hpp)
#include <sanitizer/asan_interface.h>
#endif

namespace holoscan::detail {

/** @brief Marks `size` bytes at `address` as unusable for AddressSanitizer (else does nothing). */
inline void poison_memory(const volatile void* address, std::size_t size) noexcept {
#if !HOLOSCAN_DLPACK_RECYCLE
  __asan_poison_memory_region(address, size);
#else
  (void)address;
  (void)size;
#endif
}

/** @brief Marks `size` bytes at `address` as usable again (see poison_memory). */
inline void unpoison_memory(const volatile void* address, std::size_t size) noexcept {
#if !HOLOSCAN_DLPACK_RECYCLE
  __asan_unpoison_memory_region(address, size);
#else
  (void)address;
  (void)size;
#endif
}

/** @brief Blocks for objects of class `Owner`, kept for owners of that class for good. */
template <class Owner>
class HOLOSCAN_DLPACK_ABI KeptBlocks {
 public:
  /** @brief The bytes at the start of a kept block that the stack writes (its link). */
  static constexpr std::size_t kLinkBytes = sizeof(void*);

  /** @brief A kept block, or a new one from the heap; null when the heap refuses. */
  static void* take() noexcept {
    (void)fork_handler_registered;
    if (void* block = PointerCache<KeptBlocks>::take()) {
      return block;
    }
    if (void* block = pop()) {
      return block;
    }
    return ::operator new (sizeof(Owner), std::align_val_t{alignof(Owner)}, std::nothrow);
  }
  /** @brief Gives `block` (from take()) back, for owners of this class only. */
  static void give(void* block) noexcept { PointerCache<KeptBlocks>::give(block); }
  /** @brief PointerCache's policy for a block its lists have no room for: kept on the stack. */
  static void release(void* block) noexcept {
    std::lock_guard<SpinMutex> lock(stack_.mutex);
    *static_cast<void**>(block) = stack_.top.load(std::memory_order_relaxed);
    // Published after its link: a fork() at any instant leaves the child a whole stack.
    stack_.top.store(block, std::memory_order_release);
  }

 private:
  struct Stack {
    SpinMutex mutex;
    std::atomic<void*> top{nullptr};
  };

  static void* pop() noexcept {
    if (stack_.top.load(std::memory_order_relaxed) == nullptr) {
      return nullptr;  // the usual case: the lists in front hold every free block
    }
    std::lock_guard<SpinMutex> lock(stack_.mutex);
    void* block = stack_.top.load(std::memory_order_relaxed);
    if (block != nullptr) {
      stack_.top.store(*static_cast<void**>(block), std::memory_order_relaxed);
    }
    return block;
  }

  // A fork() while another thread held the lock would leave it held in the child for good. Each
  // step under it leaves the stack whole (a link is written before the block is published), so
  // the child only frees the lock; a block that thread was moving is lost to the child, never
  // handed out twice.
  static void unlock_in_child() noexcept { new (&stack_.mutex) SpinMutex(); }

  // Constant-initialized, never destroyed: blocks may come back during static destruction.
  static inline Stack stack_{};
  // Registered when the library is loaded (take() uses it, so it is instantiated and initialized
  // among the static initializers), before any thread of the library exists.
  static inline const bool fork_handler_registered =
      pthread_atfork(nullptr, nullptr, &KeptBlocks::unlock_in_child) == 0;
};

}  // namespace holoscan::detail
