#pragma once
// Free lists that hand memory back out instead of returning it to malloc, so that the import and
// export paths allocate nothing once warm. Under AddressSanitizer they pass straight to the heap,
// so that a use after free is still caught.
#include <cstddef>
#include <mutex>
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

/** @brief Blocks of `Size` bytes aligned to `Align`, kept for reuse (at most kKeep of them). */
template <std::size_t Size, std::size_t Align>
class HOLOSCAN_DLPACK_ABI BlockRecycler {
 public:
  /** @brief Blocks kept at most; beyond them a given block goes back to the heap. */
  static constexpr std::size_t kKeep = 4096;

  /** @brief The process's recycler of this size (leaked: blocks may be given back at exit). */
  static BlockRecycler& instance() noexcept {
    static auto* recycler = new BlockRecycler();
    return *recycler;
  }

  /** @brief A block: a kept one, or a new one from the heap; null when the heap refuses. */
  void* take() noexcept {
#if HOLOSCAN_DLPACK_RECYCLE
    {
      std::lock_guard<SpinMutex> lock(mutex_);
      if (head_ != nullptr) {
        Node* node = head_;
        head_ = node->next;
        --kept_;
        return node;
      }
    }
#endif
    return ::operator new (kBlock, std::align_val_t{kAlign}, std::nothrow);
  }

  /** @brief Gives `block` (from take()) back. */
  void give(void* block) noexcept {
#if HOLOSCAN_DLPACK_RECYCLE
    {
      std::lock_guard<SpinMutex> lock(mutex_);
      if (kept_ < kKeep) {
        head_ = new (block) Node{head_};
        ++kept_;
        return;
      }
    }
#endif
    ::operator delete (block, std::align_val_t{kAlign});
  }

 private:
  struct Node {
    Node* next;
  };
  static constexpr std::size_t kBlock = Size < sizeof(Node) ? sizeof(Node) : Size;
  static constexpr std::size_t kAlign = Align < alignof(Node) ? alignof(Node) : Align;

  BlockRecycler() = default;
  SpinMutex mutex_;
  Node* head_ = nullptr;
  std::size_t kept_ = 0;
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
        count == 1 ? BlockRecycler<sizeof(T), alignof(T)>::instance().take()
                   : ::operator new (count * sizeof(T), std::align_val_t{alignof(T)}, std::nothrow);
    if (memory == nullptr) {
      throw std::bad_alloc();
    }
    return static_cast<T*>(memory);
  }
  /** @brief Gives back what allocate() gave. */
  void deallocate(T* memory, std::size_t count) noexcept {
    if (count == 1) {
      BlockRecycler<sizeof(T), alignof(T)>::instance().give(memory);
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
