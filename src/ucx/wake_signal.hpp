#pragma once
// Wakes the threads asleep on a worker's fd when another thread's progress round did what they
// slept for: UCX's fd tells only whoever progresses first, so without this a waiter could sleep
// to its deadline beside an arrival another thread already landed for it.
#include <cstddef>

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
  /** @brief A thread is about to sleep on fd(). */
  void enter_sleep() noexcept { ++sleepers_; }
  /** @brief A sleeper is back; the last one back clears the signal. */
  void leave_sleep() noexcept;
  /** @brief Something happened: wakes every sleeper (nothing to do when none sleeps). */
  void post() noexcept;

 private:
  int fd_ = -1;
  std::size_t sleepers_ = 0;
  bool posted_ = false;
};

}  // namespace holoscan::ucx::detail
