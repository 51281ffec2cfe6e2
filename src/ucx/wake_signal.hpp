#pragma once
// Wakes the threads asleep on a worker's fd when another thread's progress round did what they
// slept for: UCX's fd tells only whoever progresses first, so without this a waiter could sleep
// to its deadline beside an arrival another thread already landed for it.
#include <cstddef>
#include <cstdint>

namespace holoscan::ucx::detail {

/** @brief An eventfd posted when progress happened while threads sleep; used under one mutex. */
class WakeSignal {
 public:
  WakeSignal() noexcept;
  ~WakeSignal();
  WakeSignal(const WakeSignal&) = delete;
  WakeSignal& operator=(const WakeSignal&) = delete;

  /** @brief The fd to sleep on beside UCX's; negative when none could be made (then poll). */
  int fd() const noexcept { return fd_; }
  /** @brief A thread is about to sleep on fd(); pass the ticket to leave_sleep(). */
  std::uint64_t enter_sleep() noexcept {
    ++sleeping_;
    return posts_;
  }
  /** @brief A sleeper is back; the last one back of those a post woke clears the signal. */
  void leave_sleep(std::uint64_t ticket) noexcept;
  /** @brief Something happened: wakes every sleeper (nothing to do when none sleeps). */
  void post() noexcept;

 private:
  int fd_ = -1;
  std::uint64_t posts_ = 0;   // posts so far: a sleeper's ticket tells which it slept through
  std::size_t sleeping_ = 0;  // asleep since the last post
  std::size_t owed_ = 0;      // asleep at the last post and not back yet
  bool posted_ = false;
};

}  // namespace holoscan::ucx::detail
