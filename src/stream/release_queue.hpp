#pragma once
// The queue of releases waiting for the GPU, and the thread that runs them once it has passed.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "cuda/cuda_api.hpp"
#include "holoscan/export.hpp"
#include "spin_mutex.hpp"
#include "stream/defer_release.hpp"
#include "stream/fork_locked.hpp"
#include "stream/pooled_events.hpp"
#include "stream/stream_progress.hpp"

namespace holoscan::detail {

/** @brief One release waiting for its points. */
struct HOLOSCAN_DLPACK_ABI PendingRelease {
  StreamPointList points;             ///< Still to complete; empty once it may run.
  ReleaseFunction release = nullptr;  ///< Run once, never under the queue's lock; null: dropped.
  void* context = nullptr;            ///< Argument of `release`.
  std::uint64_t ticket = 0;           ///< Order of arrival.
  /// The ticket a flush counts it under: its own, or, queued by a deleter the release thread was
  /// running, that release's (a flush waiting for a release waits for what its deleter deferred).
  std::uint64_t flush_ticket = 0;
  bool started = false;               ///< Its release is running: never start it again.
};

/**
 * @brief A thread waiting in flush(): it counts down the releases queued before it as they run,
 *        so that a release costs the same to account for however many others are pending.
 */
struct Flusher {
  std::uint64_t target = 0;   ///< Releases with a smaller flush ticket are waited for.
  std::size_t remaining = 0;  ///< Of those, the ones not yet run.
  Flusher* next = nullptr;    ///< The next waiting flush (a list of stack objects).
};

/**
 * @brief One thread polls the pending releases (instead of blocking in cudaEventSynchronize: a
 *        blocked wait spins a core on default events and holds back releases whose streams finish
 *        earlier) and runs each once its points have completed.
 *
 * Two locks. An application thread's push takes only the intake lock, a spin lock held for a few
 * stores, so that a thread dropping an owner never sleeps in the kernel while the worker holds the
 * queue's lock (which it takes and drops around every release it runs); the worker takes the
 * intake lock, inside the queue's lock, only to move new releases in and finished nodes back (and
 * to queue what its deleters drop, which waiting flushes count in under the queue's lock).
 * The lists are changed only under their locks, so that a fork() (which takes both first) leaves
 * them consistent in the child. At exit the thread drains what is left, within a time limit.
 *
 * Backpressure: threads that drop owners faster than this one thread runs deleters (or while a
 * deleter blocks it) would grow the queue, and the events its points hold, without bound. A push
 * that finds more releases than the backlog limit neither run nor known to wait for the GPU
 * wakes the worker and waits, briefly, for it to catch up (never for the GPU).
 */
class HOLOSCAN_DLPACK_ABI ReleaseQueue {
 public:
  /** @brief The process's queue, made on first use (never destroyed: static destructors may
   *         still release owners). */
  static ReleaseQueue& instance() noexcept;
  /** @brief The process's queue if one was made, else null (makes none). */
  static ReleaseQueue* existing() noexcept;
  /**
   * @brief Counts `waited` against the exit drain's limit: time an application's own drain spent
   *        waiting for releases before the library's exit handler (Python's atexit hook). The
   *        library's drain then waits only for what is left of the limit, so that the two never
   *        wait longer than it together for the same releases; a release queued after the
   *        application's drain gives the library's its whole limit again (new work, which that
   *        drain never waited for: an embedded interpreter finalized, the process going on).
   */
  static void application_exit_wait(std::chrono::steady_clock::duration waited) noexcept;

  /** @brief What push() did with a release. */
  enum class PushResult {
    kQueued,  ///< The release thread runs it.
    kClosed,  ///< The exit drain is over: no thread will; it is left to the caller.
    kNoRoom,  ///< Out of memory, or no thread could start: it is left to the caller.
  };

  /**
   * @brief Queues `release(context)` after `points` (taken: `points` is left empty), or leaves
   *        both to the caller and says why.
   */
  PushResult push(StreamPointList& points, ReleaseFunction release, void* context) noexcept;
  /** @brief When the exit drain gives up (meaningful once push() said kClosed). */
  std::chrono::steady_clock::time_point drain_deadline() noexcept;
  /** @brief Waits for every release queued before the call, and for those their deleters queued
   *         in turn; at once on the release thread. */
  void flush() noexcept;
  /** @brief flush(), for at most until `deadline`; true when every one of them ran (or will never
   *         run: the exit drain is over), false when the deadline came first. */
  bool flush_until(std::chrono::steady_clock::time_point deadline) noexcept;
  /** @brief Releases queued and not yet run. */
  std::size_t outstanding() noexcept;
  /** @brief Threads waiting in flush() now. */
  std::size_t waiting_flushes() noexcept;
  /** @brief The options changed: a rest under way ends now, and the next uses the new ones. */
  void options_changed() noexcept;

 private:
  ReleaseQueue() noexcept;
  friend ReleaseQueue& fork_locked<ReleaseQueue>() noexcept;

  bool start_worker_locked() noexcept;
  // flush() and flush_until(): no deadline waits for every release queued before the call.
  bool flush_waiting(std::optional<std::chrono::steady_clock::time_point> deadline) noexcept;
  void close_locked() noexcept;
  bool intake_empty() noexcept;
  bool behind_locked(std::size_t releases) const noexcept;
  bool behind_by_more_than(std::size_t releases) noexcept;
  void wait_for_the_worker(std::size_t limit) noexcept;
  void run() noexcept;
  bool nothing_left_to_start() noexcept;
  bool drops_wait_for_me() noexcept;
  void poll_active(std::uint64_t inherited_below) noexcept;
  void move_completed_to_running() noexcept;
  bool run_ready(std::unique_lock<std::mutex>& lock) noexcept;
  void count_out(std::uint64_t flush_ticket, bool caught_up) noexcept;
  void count_in_waiting_flushes(const PendingRelease& release) noexcept;
  void stop() noexcept;
  static std::size_t dead_worker_bytes(std::size_t active) noexcept;
  void keep_the_dead_workers_state() noexcept;
  void renew_in_child() noexcept;

 public:
  /** @brief pthread_atfork handlers: both locks are held across fork(), renewed in the child. */
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
  static constexpr int kRestFactor = 9;  // at most a tenth of the time spent querying the GPU
  // The longest a drop waits for the worker to catch up (past the backlog limit): a deleter that
  // blocks the worker, or needs a lock the dropping thread holds, costs a drop no more.
  static constexpr std::chrono::microseconds kCatchUpWaitMax{1000};

  std::mutex mutex_;
  std::condition_variable wake_;       // new work, a stop
  std::condition_variable drained_;    // a flush's releases have all run, the drain ended
  std::condition_variable caught_up_;  // the worker is no longer far behind, or the drain ended
  // Under intake_ (taken alone by an application thread's push and by outstanding(), inside
  // mutex_ by everyone else, never
  // the other way round): what push touches.
  SpinMutex intake_;
  std::list<PendingRelease> incoming_;
  std::list<PendingRelease> spare_;  // finished nodes, reused so a push need not allocate
  std::size_t outstanding_ = 0;      // queued and not yet run
  std::size_t known_waiting_ = 0;    // of those, found waiting for the GPU in the last round
  std::uint64_t next_ticket_ = 0;
  // What applications' drains waited (application_exit_wait), counted while no release was
  // queued after them: next_ticket_ as the last of them left it.
  std::chrono::steady_clock::duration application_waited_{0};
  std::uint64_t application_wait_ticket_ = 0;
  bool closed_ = false;  // the exit drain ended (or was abandoned): nothing more is taken
                         // (written under both locks, so either one suffices to read it)
  // A worker was started (set under mutex_; cleared only in a forked child): until then a push
  // takes mutex_ to start one.
  std::atomic<bool> worker_started_{false};
  // Under mutex_:
  std::list<PendingRelease> active_;     // polled by the worker, which alone changes its points
  std::list<PendingRelease> running_;    // completed; run (or running) in order
  std::uint64_t inherited_below_ = 0;    // in a forked child: tickets queued by the parent
  Flusher* flushers_ = nullptr;          // threads waiting in flush()
  unsigned char* room_for_the_child_ = nullptr;  // made by prepare_fork() (see there)
  std::size_t catching_up_waiters_ = 0;  // drops waiting for the worker (caught_up_)
  std::uint64_t options_version_ = 0;    // counts options_changed(): a rest ends when it moves
  bool stopping_ = false;                // the exit drain was asked for
  bool abandoned_ = false;               // the exit drain ran out of time: nothing more is run
  std::chrono::steady_clock::time_point drain_deadline_{};  // set as the exit drain begins
  std::unique_ptr<std::thread> worker_;
  // The worker's own (never under the lock): how far each stream has got, and the active
  // releases' points of this round.
  StreamProgress progress_;
  std::vector<StreamPointList*> round_points_;
};

}  // namespace holoscan::detail
