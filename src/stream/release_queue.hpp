#pragma once
// The queue of releases waiting for the GPU, and the thread that runs them once it has passed.
#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <thread>

#include "cuda/cuda_api.hpp"
#include "holoscan/export.hpp"
#include "stream/defer_release.hpp"
#include "stream/pooled_events.hpp"

namespace holoscan::detail {

/** @brief One release waiting for its points. */
struct HOLOSCAN_DLPACK_ABI PendingRelease {
  StreamPointList points;             ///< Still to complete; empty once it may run.
  ReleaseFunction release = nullptr;  ///< Run once, never under the queue's lock.
  void* context = nullptr;            ///< Argument of `release`.
  std::uint64_t ticket = 0;           ///< Order of arrival, for flush.
  bool started = false;               ///< Its release is running: never start it again.
  std::uint64_t fan_in = 0;           ///< The fan-in its fanned points wait in; 0 for none.
};

/**
 * @brief A thread waiting in flush(): it counts down the releases queued before it as they run,
 *        so that a release costs the same to account for however many others are pending.
 */
struct Flusher {
  std::uint64_t target = 0;   ///< Releases with a smaller ticket were queued before the flush.
  std::size_t remaining = 0;  ///< Of those, the ones not yet run.
  Flusher* next = nullptr;    ///< The next waiting flush (a list of stack objects).
};

/**
 * @brief One polling round's fan-in: the release thread's stream of each device waited on the
 *        round's new points, then recorded one event; once those complete, so have the points.
 */
struct HOLOSCAN_DLPACK_ABI FanIn {
  std::uint64_t id = 0;      ///< 0: the slot is free.
  StreamPointList marks;     ///< The events recorded after the waits, one per device; dropped
                             ///< as they complete.
  std::size_t releases = 0;  ///< Releases whose fanned points still wait in this fan-in.
  bool broken = false;       ///< A mark could not be recorded: poll the points themselves.
  std::chrono::steady_clock::time_point started;  ///< When its marks were recorded.
};

/**
 * @brief One thread polls the pending releases (instead of blocking in cudaEventSynchronize: a
 *        blocked wait spins a core on default events and holds back releases whose streams finish
 *        earlier) and runs each once its points have completed.
 *
 * The lists are changed only under the lock, so that a fork() (which takes it first) leaves them
 * consistent in the child. At exit the thread drains what is left, within a time limit.
 */
class HOLOSCAN_DLPACK_ABI ReleaseQueue {
 public:
  /** @brief The process's queue (leaked: static destructors may still release owners). */
  static ReleaseQueue& instance() noexcept;
  /** @brief The process's queue if one was made, else null (makes none). */
  static ReleaseQueue* existing() noexcept;

  /** @brief What push() did with a release. */
  enum class PushResult {
    kQueued,  ///< The release thread runs it.
    kClosed,  ///< The exit drain is over: no thread will; it is left to the caller.
    kNoRoom,  ///< Out of memory, or no thread could start: it is left to the caller.
  };

  /** @brief Queues `pending`, or leaves it to the caller and says why. */
  PushResult push(PendingRelease&& pending) noexcept;
  /** @brief When the exit drain gives up (meaningful once push() said kClosed). */
  std::chrono::steady_clock::time_point drain_deadline() noexcept;
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
  FanIn* fan_in_new_points() noexcept;
  void poll_fan_ins() noexcept;
  void settle_points(PendingRelease& pending, std::chrono::steady_clock::time_point now) noexcept;
  cudaStream_t release_stream(int device) noexcept;
  void forget_fan_ins() noexcept;
  void move_completed_to_running() noexcept;
  bool run_ready(std::unique_lock<std::mutex>& lock) noexcept;
  void count_out(std::uint64_t ticket) noexcept;
  void stop() noexcept;
  void renew_in_child() noexcept;

 public:
  /** @brief pthread_atfork handlers: the lock is held across fork(), renewed in the child. */
  static void prepare_fork() noexcept;
  /** @brief See prepare_fork(). */
  static void after_fork_in_parent() noexcept;
  /** @brief See prepare_fork(). */
  static void after_fork_in_child() noexcept;

 private:
  // The longest rest while releases wait and none completes (or the poll interval, if longer).
  static constexpr std::chrono::microseconds kMaxIdle{1000};
  // The longest rest while a flush waits, whatever the poll interval.
  static constexpr std::chrono::microseconds kFlushRest{20};
  // The longest rest with nothing queued (or the poll interval, if longer): how late a release
  // may start after a quiet spell.
  static constexpr std::chrono::microseconds kQuietMax{20'000};
  static constexpr int kRestFactor = 9;  // at most a tenth of the time spent polling
  // Past this, the points of a fan-in that has not completed are queried one by one, so that a
  // slow stream does not hold back the releases it happened to be fanned in with.
  static constexpr std::chrono::microseconds kFanInPatience{1000};
  static constexpr std::size_t kFanInSlots = 64;

  std::mutex mutex_;
  std::condition_variable wake_;     // new work, a stop
  std::condition_variable drained_;  // a flush's releases have all run, the drain ended
  std::list<PendingRelease> incoming_;
  std::list<PendingRelease> active_;   // polled by the worker, which alone changes its points
  std::list<PendingRelease> running_;  // completed; run (or running) in order
  std::list<PendingRelease> spare_;    // finished nodes, reused so a push need not allocate
  std::size_t outstanding_ = 0;        // queued and not yet run
  std::uint64_t next_ticket_ = 0;
  std::uint64_t inherited_below_ = 0;  // in a forked child: tickets queued by the parent
  Flusher* flushers_ = nullptr;        // threads waiting in flush()
  bool stopping_ = false;              // the exit drain was asked for
  bool closed_ = false;     // the exit drain ended (or was abandoned): nothing more is taken
  bool abandoned_ = false;  // the exit drain ran out of time: nothing more is run
  std::chrono::steady_clock::time_point drain_deadline_{};  // set as the exit drain begins
  std::unique_ptr<std::thread> worker_;
  // The worker's own (never under the lock): fan-ins, and its stream per device with the CUDA
  // table that made them (tests swap tables).
  std::array<FanIn, kFanInSlots> fan_ins_{};
  std::uint64_t next_fan_in_ = 1;
  std::array<cudaStream_t, kMaxPoolDevices> release_streams_{};
  const CudaApi* release_streams_api_ = nullptr;
};

}  // namespace holoscan::detail
