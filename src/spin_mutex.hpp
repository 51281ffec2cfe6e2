#pragma once
/**
 * @file
 * @brief A one-byte mutex that never throws, for short critical sections in noexcept hooks.
 */
#include <atomic>
#include <chrono>
#include <thread>

#include "holoscan/export.hpp"

namespace holoscan::detail {

/**
 * @brief Test-and-test-and-set lock; past a short spin a waiter yields, then sleeps, so that it
 *        neither burns a core nor keeps a holder it preempted off its CPU.
 */
class HOLOSCAN_DLPACK_ABI SpinMutex {
 public:
  /** @brief Acquires the lock. */
  void lock() noexcept {
    for (int spins = 0; locked_.exchange(true, std::memory_order_acquire);) {
      while (locked_.load(std::memory_order_relaxed)) {
        back_off(++spins);
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
  // sched_yield() hands the CPU only to threads of the caller's priority or above: a real-time
  // waiter (SCHED_FIFO) that preempted a normal holder on its CPU would spin until the kernel
  // throttles it (950 ms of each second by default; for ever where throttling is off). A sleep
  // lets any holder run.
  static void back_off(int spins) noexcept {
    if (spins > kSpinsBeforeSleep) {
      std::this_thread::sleep_for(kSleep);
    } else if (spins > kSpinsBeforeYield) {
      std::this_thread::yield();
    }
  }

  static constexpr int kSpinsBeforeYield = 64;
  static constexpr int kSpinsBeforeSleep = kSpinsBeforeYield + 64;  // then 64 yields
  static constexpr std::chrono::microseconds kSleep{10};
  std::atomic<bool> locked_{false};
};

}  // namespace holoscan::detail
