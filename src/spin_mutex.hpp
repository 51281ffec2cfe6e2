#pragma once
/**
 * @file
 * @brief An eight-byte mutex that never throws, for short critical sections in noexcept hooks.
 */
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

#include "holoscan/export.hpp"

namespace holoscan::detail {

/**
 * @brief Test-and-test-and-set lock; past a short spin a waiter sleeps in the kernel on the
 *        lock's word (a futex) until an unlock wakes it, so that it neither burns a core nor keeps
 *        a holder it preempted off its CPU.
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
    while (!try_lock()) {
      sleep_while_locked();
    }
  }
  /** @brief Acquires the lock only if it is free. */
  bool try_lock() noexcept {
    return locked_.load(std::memory_order_relaxed) == 0 &&
           locked_.exchange(1, std::memory_order_acquire) == 0;
  }
  /** @brief Releases the lock, waking one of the waiters asleep in this lock if there is any. */
  void unlock() noexcept {
    // Read before the lock is free: past the store, the next holder may destroy this lock (as
    // after any mutex's unlock); only the wake call names its address after that, which the
    // kernel takes as a number (a freed address wakes no one).
    const bool wake = sleepers_.load(std::memory_order_relaxed) != 0;
    locked_.store(0, std::memory_order_release);
    if (wake) {
      futex(FUTEX_WAKE_PRIVATE, 1, nullptr);
    }
  }

  /** @brief In a child after fork(): forgets waiters counted here, threads the child does not
   *         have (they would make every unlock a wake call that finds no one). */
  void forget_sleepers_after_fork() noexcept { sleepers_.store(0, std::memory_order_relaxed); }

  /** @brief Waiters asleep in this lock now (a snapshot, for tests and diagnostics). */
  std::uint32_t sleepers() const noexcept { return sleepers_.load(std::memory_order_relaxed); }

 private:
  // Spinning and sched_yield() never hand the CPU to a thread of a lower class: a real-time
  // (SCHED_FIFO) waiter that preempted a normal holder on its CPU would keep it there until the
  // kernel throttles it (after 950 ms of each second by default; never where throttling is off),
  // and short timed sleeps did not reliably let the holder run on a loaded host. Asleep on the
  // word, the waiter leaves the CPU to the holder until its unlock.
  //
  // The unlock stays a plain store (an exchange would add an atomic to every lock the hop takes):
  // it reads the sleepers' count without a fence, so in the instant a waiter announces itself it
  // may miss it; the timeout bounds what that costs, a late wake, never a hang. (Read after the
  // store instead, the count could be missed just the same: x86 lets a load pass an earlier
  // store.)
  //
  // The count is the lock's own, beside its word on one cache line, so that the unlock of one
  // lock makes no wake call while threads sleep in another: with one count for the process, an
  // oversubscribed pipeline (one lock contended) made every unlock of every lock a system call.
  void sleep_while_locked() noexcept {
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    timespec timeout{0, kSleepLimitNs};
    futex(FUTEX_WAIT_PRIVATE, 1, &timeout);  // returns at once if the word is no longer 1
    sleepers_.fetch_sub(1, std::memory_order_relaxed);
  }

  // An interruption, a timeout or a word changed meanwhile ends a wait early: lock() retries.
  void futex(int operation, std::uint32_t value, const timespec* timeout) noexcept {
    static_assert(sizeof(locked_) == sizeof(std::uint32_t), "a futex is a 32-bit word");
    (void)syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&locked_), operation, value, timeout,
                  nullptr, 0);
  }

  static void relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield" ::: "memory");
#endif
  }

  static constexpr int kSpins = 128;
  static constexpr long kSleepLimitNs = 1000000;  // 1 ms: a missed wake's cost
  std::atomic<std::uint32_t> locked_{0};
  // A thread that fork() left out of the child may stay counted here (unless the child's
  // handlers forget it): the child's unlocks of this lock then make wake calls that find no one,
  // a cost, never a hang.
  std::atomic<std::uint32_t> sleepers_{0};
};

}  // namespace holoscan::detail
