#pragma once
// The public calls under way on a wing's endpoint (ipc Exporter and Importer, ucx Worker), so that
// its destructor (or a move-assignment over it) can end them and wait for them before it frees what
// they read: another thread's receive(-1), accept() or add_peer() is otherwise ended only by the
// peer.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <thread>

namespace holoscan::detail {

/**
 * @brief Counts an endpoint's calls while they run and tells them when the endpoint is going.
 *        A call counts itself first and asks ending() second; the end is marked first and the
 *        count read second, all sequentially consistent: either the call sees the end, or the
 *        end sees the call and waits for it. A call must not start once the destructor may
 *        have returned: that is the caller's error, as for any object.
 */
class CallsUnderWay {
 public:
  /** @brief A call begins. */
  void enter() noexcept { count_.fetch_add(1, std::memory_order_seq_cst); }
  /** @brief A call returns: its last touch of the endpoint. */
  void leave() noexcept { count_.fetch_sub(1, std::memory_order_release); }
  /** @brief Whether the endpoint is going: a call returns at once (kClosed). */
  bool ending() const noexcept { return ending_.load(std::memory_order_seq_cst); }
  /** @brief Marks the endpoint going; the caller then wakes the calls asleep in a wait. */
  void end() noexcept { ending_.store(true, std::memory_order_seq_cst); }
  /** @brief Waits until every call counted has returned. At once in a child forked without
   *         exec: the count came with the fork, the threads of its calls did not. */
  void wait() const noexcept {
    while (::getpid() == owner_ && count_.load(std::memory_order_seq_cst) != 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

 private:
  std::atomic<std::size_t> count_{0};
  std::atomic<bool> ending_{false};
  const pid_t owner_ = ::getpid();  // the process whose threads the count is of
};

/** @brief Counts one call while it runs; none for an endpoint moved from (null). */
class CallUnderWay {
 public:
  /** @brief Counts a call on `calls` (null: nothing to count). */
  explicit CallUnderWay(CallsUnderWay* calls) noexcept : calls_(calls) {
    if (calls_ != nullptr) {
      calls_->enter();
    }
  }
  CallUnderWay(const CallUnderWay&) = delete;
  CallUnderWay& operator=(const CallUnderWay&) = delete;
  ~CallUnderWay() {
    if (calls_ != nullptr) {
      calls_->leave();
    }
  }

  /** @brief Whether the endpoint is going: the call must return at once. */
  bool ending() const noexcept { return calls_ != nullptr && calls_->ending(); }

 private:
  CallsUnderWay* calls_;
};

}  // namespace holoscan::detail
