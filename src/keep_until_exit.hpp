#pragma once
// For memory that GPU or transport work may still use after its owner went away (a request UCX
// never completed, an export a live peer may still read): it is kept, never freed, until the
// process exits. Out of host memory most of all: dropping it then would be a use after free.
#include <atomic>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <type_traits>
#include <utility>

namespace holoscan::detail {

/** @brief Values keep_until_exit() can place without the heap, per type. */
inline constexpr std::size_t kKeptWithoutHeap = 64;

/** @brief One value kept by keep_until_exit(), on a list that static storage reaches. */
template <class T>
struct KeptUntilExit {
  T value;                           ///< What is kept.
  KeptUntilExit* earlier = nullptr;  ///< The value kept before it.
};

/**
 * @brief Keeps `value` alive until the process exits, reachable from static storage (leak
 *        checkers do not count it); never throws. When the heap refuses, it takes one of
 *        kKeptWithoutHeap static slots; past those the process aborts rather than free memory
 *        that may still be in use.
 */
template <class T>
void keep_until_exit(T value) noexcept {
  // No lock and no first-use guard, only constant-initialized atomics: a fork() while another
  // thread is in here (moving its value, say) leaves nothing taken in the child, which may keep
  // values too (a mutex or a guarded static copied mid-use would hang it for ever).
  static std::atomic<KeptUntilExit<T>*> last{nullptr};
  alignas(T) static unsigned char slots[kKeptWithoutHeap * sizeof(T)];
  static std::atomic<std::size_t> slots_taken{0};
  static_assert(std::is_nothrow_move_constructible_v<T>, "kept values move without throwing");
  // When the heap refuses, the value is not moved from: the slots take it below.
  if (auto* kept = new (std::nothrow) KeptUntilExit<T>{std::move(value)}; kept != nullptr) {
    kept->earlier = last.load(std::memory_order_relaxed);
    while (!last.compare_exchange_weak(kept->earlier, kept, std::memory_order_release,
                                       std::memory_order_relaxed)) {
    }
    return;
  }
  if (const std::size_t slot = slots_taken.fetch_add(1, std::memory_order_relaxed);
      slot < kKeptWithoutHeap) {
    new (slots + slot * sizeof(T)) T(std::move(value));  // never destroyed
    return;
  }
  std::fputs(
      "holoscan-dlpack: out of host memory while keeping memory that GPU or transport work "
      "may still use; aborting rather than freeing it\n",
      stderr);
  std::abort();
}

}  // namespace holoscan::detail
