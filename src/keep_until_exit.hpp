#pragma once
// For memory that GPU or transport work may still use after its owner went away (a request UCX
// never completed, an export a live peer may still read): it is kept, never freed, until the
// process exits. Out of host memory most of all: dropping it then would be a use after free.
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

namespace holoscan::detail {

/** @brief Values keep_until_exit() can place without the heap, per type. */
inline constexpr std::size_t kKeptWithoutHeap = 64;

/**
 * @brief Keeps `value` alive until the process exits, reachable from static storage (leak
 *        checkers do not count it); never throws. When the heap refuses, it takes one of
 *        kKeptWithoutHeap static slots; past those the process aborts rather than free memory
 *        that may still be in use.
 */
template <class T>
void keep_until_exit(T value) noexcept {
  static std::mutex mutex;  // constant-initialized: usable at any time
  static std::vector<T>* kept = new (std::nothrow) std::vector<T>();
  alignas(T) static unsigned char slots[kKeptWithoutHeap * sizeof(T)];
  static std::size_t slots_used = 0;
  const std::lock_guard<std::mutex> lock(mutex);
  if (kept != nullptr) {
    try {
      kept->push_back(std::move(value));  // a refused growth leaves `value` as it was
      return;
    } catch (...) {  // NOLINT(bugprone-empty-catch): the static slots take it below
    }
  }
  if (slots_used < kKeptWithoutHeap) {
    new (slots + slots_used * sizeof(T)) T(std::move(value));  // never destroyed
    ++slots_used;
    return;
  }
  std::fputs("holoscan-dlpack: out of host memory while keeping memory that GPU or transport work "
             "may still use; aborting rather than freeing it\n",
             stderr);
  std::abort();
}

}  // namespace holoscan::detail
