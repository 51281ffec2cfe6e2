#pragma once
// The queue of releases waiting for the GPU, and the thread that runs them once it has passed.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "deferred_release.hpp"

namespace holoscan::detail {

/** @brief One release waiting for its points. */
struct PendingRelease {
  StreamPointList points;             ///< Still to complete; empty once it may run.
  ReleaseFunction release = nullptr;  ///< Run once, never under the queue's lock.
  void* context = nullptr;            ///< Argument of `release`.
  std::uint64_t ticket = 0;           ///< Order of arrival, for flush.
  bool started = false;               ///< Its release is running: never start it again.
};

/**
 * @brief One thread polls the pending releases (instead of blocking in cudaEventSynchronize: a
 *        blocked wait spins a core on default events and holds back releases whose streams finish
 *        earlier) and runs each once its points have completed.
 *
 * The lists are changed only under the lock, so that a fork() (which takes it first) leaves them
 * consistent in the child. At exit the thread drains what is left, within a time limit.
 */
class ReleaseQueue {
 public:
  /** @brief The process's queue (leaked: static destructors may still release owners). */
  static ReleaseQueue& instance() noexcept;

  /** @brief Queues `pending`; false if it cannot (out of memory, no thread, exit drain over). */
  bool push(PendingRelease&& pending) noexcept;
  /** @brief Waits for every release queued before the call; at once on the release thread. */
  void flush() noexcept;
  /** @brief Releases queued and not yet run. */
  std::size_t outstanding() noexcept;

 private:
  ReleaseQueue() = default;

  bool start_worker_locked() noexcept;
  void run() noexcept;
  bool nothing_left_to_start() const noexcept;
  void poll_active(std::uint64_t inherited_below) noexcept;
  void move_completed_to_running() noexcept;
  bool run_ready(std::unique_lock<std::mutex>& lock) noexcept;
  void stop() noexcept;
  void prepare_fork() noexcept;
  void after_fork_in_parent() noexcept;
  void after_fork_in_child() noexcept;

  static constexpr std::chrono::microseconds kMinIdle{20};
  static constexpr std::chrono::microseconds kMaxIdle{1000};

  std::mutex mutex_;
  std::condition_variable wake_;     // new work, a stop
  std::condition_variable drained_;  // a release finished, the drain ended
  std::list<PendingRelease> incoming_;
  std::list<PendingRelease> active_;       // polled by the worker, which alone changes its points
  std::list<PendingRelease> running_;      // completed; run (or running) in order
  std::vector<std::uint64_t> unfinished_;  // tickets queued and not yet released, ascending
  std::uint64_t next_ticket_ = 0;
  std::uint64_t inherited_below_ = 0;  // in a forked child: tickets queued by the parent
  int flushers_ = 0;
  bool stopping_ = false;   // the exit drain was asked for
  bool closed_ = false;     // the exit drain ended (or was abandoned): nothing more is taken
  bool abandoned_ = false;  // the exit drain ran out of time: nothing more is run
  std::unique_ptr<std::thread> worker_;
};

}  // namespace holoscan::detail
