#pragma once
/**
 * @file
 * @brief A four-byte mutex that never throws, for short critical sections in noexcept hooks.
 */
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

#include "holoscan/export.hpp"

namespace holoscan::detail {

/**
 * @brief Spins briefly, then sleeps in the kernel (a futex) until the holder's unlock wakes it,
 *        so that a waiter neither burns a core nor keeps a holder it preempted off its CPU.
 */
class HOLOSCAN_DLPACK_ABI SpinMutex {
 public:
  /** @brief Acquires the lock. */
  void lock() noexcept {
    for (int spins = 0; spins < kSpins; ++spins) {
      if (try_lock()) {
        return;
      }
      relax();
    }
    lock_contended();
  }
  /** @brief Acquires the lock only if it is free. */
  bool try_lock() noexcept {
    std::uint32_t expected = kFree;
    return state_.load(std::memory_order_relaxed) == kFree &&
           state_.compare_exchange_strong(expected, kLocked, std::memory_order_acquire,
                                          std::memory_order_relaxed);
  }
  /** @brief Releases the lock, waking one sleeping waiter if there is one. */
  void unlock() noexcept {
    if (state_.exchange(kFree, std::memory_order_release) == kLockedWithSleepers) {
      futex(FUTEX_WAKE_PRIVATE, 1);
    }
  }

 private:
  // A waiter that only spun or yielded would keep a holder it preempted off its CPU whenever it
  // runs at a higher class: sched_yield() and short sleeps never hand the CPU to a normal thread
  // for a real-time (SCHED_FIFO) one, or not reliably on a loaded host. Sleeping on the lock's
  // word until unlock() wakes it lets any holder run, for as long as it needs.
  void lock_contended() noexcept {
    // Marks a sleeper before each sleep, so that the holder's unlock() wakes one; a waiter that
    // gets the lock this way leaves it marked, which costs at most one needless wake.
    while (state_.exchange(kLockedWithSleepers, std::memory_order_acquire) != kFree) {
      futex(FUTEX_WAIT_PRIVATE, kLockedWithSleepers);
    }
  }

  // Only interruptions and a word changed meanwhile end a wait early: the loop above retries.
  void futex(int operation, std::uint32_t value) noexcept {
    static_assert(sizeof(state_) == sizeof(std::uint32_t), "a futex is a 32-bit word");
    (void)syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&state_), operation, value, nullptr,
                  nullptr, 0);
  }

  static void relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield" ::: "memory");
#endif
  }

  static constexpr std::uint32_t kFree = 0;
  static constexpr std::uint32_t kLocked = 1;
  static constexpr std::uint32_t kLockedWithSleepers = 2;
  static constexpr int kSpins = 128;
  std::atomic<std::uint32_t> state_{kFree};
};

}  // namespace holoscan::detail
