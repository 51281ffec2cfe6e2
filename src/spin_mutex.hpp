#pragma once
/**
 * @file
 * @brief A one-byte mutex that never throws, for short critical sections in noexcept hooks.
 */
#include <atomic>
#include <thread>

#include "holoscan/export.hpp"

namespace holoscan::detail {

/** @brief Test-and-test-and-set lock; yields after a short spin so waiters do not burn a core. */
class HOLOSCAN_DLPACK_ABI SpinMutex {
 public:
  /** @brief Acquires the lock. */
  void lock() noexcept {
    for (int spins = 0; locked_.exchange(true, std::memory_order_acquire); ++spins) {
      while (locked_.load(std::memory_order_relaxed)) {
        if (++spins > kSpinsBeforeYield) {
          std::this_thread::yield();
        }
      }
    }
  }
  /** @brief Acquires the lock only if it is free. */
  bool try_lock() noexcept {
    return !locked_.load(std::memory_order_relaxed) &&
           !locked_.exchange(true, std::memory_order_acquire);
  }
  /** @brief Releases the lock. */
  void unlock() noexcept { locked_.store(false, std::memory_order_release); }

 private:
  static constexpr int kSpinsBeforeYield = 64;
  std::atomic<bool> locked_{false};
};

}  // namespace holoscan::detail
