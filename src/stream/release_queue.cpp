#include "stream/release_queue.hpp"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <new>
#include <utility>

#include "cuda/cuda_api.hpp"
#include "cuda/cuda_error.hpp"
#include "stream/application_exit_wait.hpp"
#include "stream/fork_gate.hpp"
#include "stream/release_settings.hpp"
#include "stream/stream_point.hpp"
#include "stream/unnested_release.hpp"

namespace holoscan::detail {
namespace {

// True on the thread that runs releases: a deleter there that flushes, or exits the process,
// must not wait for (or join) the very thread it runs on.
thread_local bool on_release_thread = false;

// On the release thread, while a release runs: that release (its deleter may queue more).
thread_local const PendingRelease* running_release = nullptr;

// The queue locked by prepare_fork (none if none existed), for the other two handlers of the
// same fork(), which the same thread runs.
thread_local ReleaseQueue* locked_for_fork = nullptr;

// Registered when the library is loaded, before any thread of the library exists.
[[maybe_unused]] const bool fork_handlers_registered =
    pthread_atfork(&ReleaseQueue::prepare_fork, &ReleaseQueue::after_fork_in_parent,
                   &ReleaseQueue::after_fork_in_child) == 0;

}  // namespace

// Made on first use in static storage, without a lock or a one-time guard (fork_locked): making
// it cannot fail, and a fork() at any moment leaves either no queue (the child makes one) or a
// whole one. Never destroyed: static destructors may still release owners. Unlike fork_locked's
// other users, a forked child keeps it (after_fork_in_child renews its locks).
ReleaseQueue& ReleaseQueue::instance() noexcept { return fork_locked<ReleaseQueue>(); }

ReleaseQueue* ReleaseQueue::existing() noexcept { return fork_locked_if_made<ReleaseQueue>(); }

void application_exit_wait(std::chrono::steady_clock::duration waited) noexcept {
  ReleaseQueue::application_exit_wait(waited);
}

void ReleaseQueue::application_exit_wait(std::chrono::steady_clock::duration waited) noexcept {
  ReleaseQueue* queue = existing();
  if (queue == nullptr) {
    return;  // nothing was ever queued: nothing was waited for
  }
  std::lock_guard<SpinMutex> intake(queue->intake_);
  if (queue->application_wait_ticket_ != queue->next_ticket_) {
    queue->application_waited_ = {};  // releases were queued since: an earlier drain's wait
  }                                   // was for other work
  queue->application_waited_ += std::max(waited, std::chrono::steady_clock::duration::zero());
  queue->application_wait_ticket_ = queue->next_ticket_;
}

// Registered after the CUDA runtime's own exit handler (CUDA recorded the points that brought us
// here), so it runs before the runtime's teardown; once, by the one constructor call.
ReleaseQueue::ReleaseQueue() noexcept {
  (void)std::atexit([] {
    if (ReleaseQueue* queue = existing()) {
      queue->stop();
    }
  });
}

bool ReleaseQueue::start_worker_locked() noexcept {
  if (worker_ != nullptr) {
    return true;
  }
  // The environment is read here, on the thread whose release starts the worker, not by the
  // worker: a getenv racing the application's setenv (Python's os.environ) on a thread the
  // application does not know of could read a freed environment.
  (void)refresh_poll_interval();
  try {
    worker_ = std::make_unique<std::thread>([this] { run(); });
  } catch (...) {
    return false;
  }
  worker_started_.store(true, std::memory_order_release);
  return true;
}

void ReleaseQueue::close_locked() noexcept {
  std::lock_guard<SpinMutex> intake(intake_);
  closed_ = true;
}

bool ReleaseQueue::intake_empty() noexcept {
  std::lock_guard<SpinMutex> intake(intake_);
  return incoming_.empty();
}

// Under the intake lock. Releases queued that the worker has neither run nor found waiting for
// the GPU are its own work: whether there are more than `releases` of them.
bool ReleaseQueue::behind_locked(std::size_t releases) const noexcept {
  return outstanding_ > known_waiting_ + releases;
}

bool ReleaseQueue::behind_by_more_than(std::size_t releases) noexcept {
  std::lock_guard<SpinMutex> intake(intake_);
  return behind_locked(releases);
}

// Past the backlog limit: wakes the worker from any rest and waits until it is within half the
// limit (a margin, so that the next drops do not wait at once again), the exit drain is over, or
// kCatchUpWaitMax has passed. The worker never waits for the GPU on a drop's behalf here: what
// waits for the GPU is not counted.
void ReleaseQueue::wait_for_the_worker(std::size_t limit) noexcept {
  const auto deadline = std::chrono::steady_clock::now() + kCatchUpWaitMax;
  std::unique_lock<std::mutex> lock(mutex_);
  ++catching_up_waiters_;
  wake_.notify_one();
  caught_up_.wait_until(lock, deadline,
                        [&] { return closed_ || abandoned_ || !behind_by_more_than(limit / 2); });
  --catching_up_waiters_;
}

// After warm-up a push allocates nothing (a finished node is reused), makes no system call unless
// it waits long for the intake lock (the worker finds the release on its next round) or the worker
// is past the backlog limit, and, on an application thread, takes only the intake lock.
ReleaseQueue::PushResult ReleaseQueue::push(StreamPointList& points, ReleaseFunction release,
                                            void* context) noexcept {
  if (!worker_started_.load(std::memory_order_acquire)) {
    // The first push (or the first in a forked child) starts the worker, under the queue's lock.
    std::lock_guard<std::mutex> lock(mutex_);
    if (!closed_ && !start_worker_locked()) {
      return PushResult::kNoRoom;
    }
  }
  const std::size_t limit = backlog_limit_in_effect();
  bool behind = false;
  // Queued by a deleter the release thread runs: a flush already waiting for that deleter's
  // release waits for this one too (a pool's memory, freed as its last block's export goes), so
  // it is counted in under the queue's lock, which no flush can be registering meanwhile. No
  // other thread's push takes that lock.
  const PendingRelease* const parent = on_release_thread ? running_release : nullptr;
  std::unique_lock<std::mutex> flush_lock;
  if (parent != nullptr) {
    flush_lock = std::unique_lock<std::mutex>(mutex_);
  }
  PendingRelease* queued = nullptr;
  {
    std::lock_guard<SpinMutex> intake(intake_);
    if (closed_) {
      return PushResult::kClosed;
    }
    if (spare_.empty()) {
      try {
        incoming_.emplace_back();  // on failure `points` are left to the caller
      } catch (...) {
        return PushResult::kNoRoom;
      }
    } else {
      incoming_.splice(incoming_.end(), spare_, spare_.begin());
    }
    PendingRelease& node = incoming_.back();
    node.points.adopt(points);
    node.release = release;
    node.context = context;
    node.ticket = next_ticket_;
    node.flush_ticket = parent != nullptr ? parent->flush_ticket : node.ticket;
    node.started = false;
    ++next_ticket_;
    ++outstanding_;
    behind = limit != 0 && behind_locked(limit);
    queued = &node;
  }
  if (parent != nullptr) {
    count_in_waiting_flushes(*queued);  // the node stays put: only this thread runs releases
    flush_lock.unlock();
  }
  // A deleter dropping owners on the release thread must not wait for the thread it runs on.
  if (behind && !on_release_thread) {
    wait_for_the_worker(limit);
  }
  return PushResult::kQueued;
}

std::chrono::steady_clock::time_point ReleaseQueue::drain_deadline() noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  return drain_deadline_;
}

void ReleaseQueue::flush() noexcept { (void)flush_waiting(std::nullopt); }

bool ReleaseQueue::flush_until(std::chrono::steady_clock::time_point deadline) noexcept {
  return flush_waiting(deadline);
}

bool ReleaseQueue::flush_waiting(
    std::optional<std::chrono::steady_clock::time_point> deadline) noexcept {
  if (on_release_thread) {
    return false;  // a deleter flushing from the release thread would wait for itself
  }
  std::unique_lock<std::mutex> lock(mutex_);
  // Every release pending now was queued before the call. Done once they have all run, or once
  // the exit drain is over (what it left will never run).
  Flusher self;
  {
    std::lock_guard<SpinMutex> intake(intake_);
    self = Flusher{next_ticket_, outstanding_, flushers_};
  }
  auto done = [&] { return closed_ || self.remaining == 0; };
  // A forked child keeps the parent's releases but not its thread: start one when needed.
  if (done()) {
    return true;
  }
  if (!start_worker_locked()) {
    return false;
  }
  flushers_ = &self;
  wake_.notify_one();
  if (deadline) {
    (void)drained_.wait_until(lock, *deadline, done);
  } else {
    drained_.wait(lock, done);
  }
  Flusher** link = &flushers_;  // under the lock: count_out() no longer reaches it
  while (*link != &self) {
    link = &(*link)->next;
  }
  *link = self.next;
  return done();
}

void ReleaseQueue::options_changed() noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  ++options_version_;
  wake_.notify_all();
}

std::size_t ReleaseQueue::waiting_flushes() noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  std::size_t waiting = 0;
  for (const Flusher* flusher = flushers_; flusher != nullptr; flusher = flusher->next) {
    ++waiting;
  }
  return waiting;
}

std::size_t ReleaseQueue::outstanding() noexcept {
  std::lock_guard<SpinMutex> intake(intake_);
  return outstanding_;
}

// Under the lock, for a release a deleter queued: each flush registered before it (its ticket is
// past the flush's target, so the flush did not count it) that waits for the deleter's release
// (still counted: it has not run out yet) waits for this one as well.
void ReleaseQueue::count_in_waiting_flushes(const PendingRelease& release) noexcept {
  for (Flusher* flusher = flushers_; flusher != nullptr; flusher = flusher->next) {
    if (release.flush_ticket < flusher->target && release.ticket >= flusher->target &&
        flusher->remaining > 0) {
      ++flusher->remaining;
    }
  }
}

// Under the lock, once a release has run and its node is back with the spares (which counted it
// out): O(1) per release (and per waiting flush), whatever the backlog.
void ReleaseQueue::count_out(std::uint64_t flush_ticket, bool caught_up) noexcept {
  if (caught_up) {
    caught_up_.notify_all();
  }
  bool flushed = false;
  for (Flusher* flusher = flushers_; flusher != nullptr; flusher = flusher->next) {
    if (flush_ticket < flusher->target && flusher->remaining > 0) {
      flushed = --flusher->remaining == 0 || flushed;
    }
  }
  if (flushed) {
    drained_.notify_all();
  }
}

// Under the lock. A waiting drop always has work of the worker's behind it (its own release at
// least), which it finds at its next intake: the quiet rest ends on a non-empty intake.
bool ReleaseQueue::drops_wait_for_me() noexcept {
  return catching_up_waiters_ != 0 && behind_by_more_than(backlog_limit_in_effect() / 2);
}

bool ReleaseQueue::nothing_left_to_start() noexcept {
  return intake_empty() && active_.empty() &&
         std::all_of(running_.begin(), running_.end(),
                     [](const PendingRelease& p) { return p.started; });
}

// Each round asks the GPU about each stream once (its newest point; a binary search only while
// it lags), not about each point: a query costs about 1.3 us on the H200, and each of them
// competes with the application's calls for the driver (StreamProgress).
void ReleaseQueue::poll_active(std::uint64_t inherited_below) noexcept {
  round_points_.clear();
  for (PendingRelease& pending : active_) {
    if (pending.ticket < inherited_below) {
      // Queued by the parent before a fork(): see after_fork_in_child(). Its events are the
      // parent's and are forgotten, not queried nor pooled.
      pending.points.clear();
      continue;
    }
    if (forget_points_of_another_process(pending.points)) {
      // Queued here, after a fork(), but waiting for points the parent recorded (an owner the
      // child dropped): dropped as the inherited ones are, its release never run here.
      pending.release = nullptr;
      continue;
    }
    try {
      round_points_.push_back(&pending.points);
    } catch (...) {
      break;  // out of memory: the others are settled in a later round
    }
  }
  progress_.settle(round_points_);
}

void ReleaseQueue::move_completed_to_running() noexcept {
  for (auto it = active_.begin(); it != active_.end();) {
    auto next = std::next(it);
    if (it->points.empty()) {
      running_.splice(running_.end(), active_, it);  // no allocation: the node moves over
    }
    it = next;
  }
}

bool ReleaseQueue::run_ready(std::unique_lock<std::mutex>& lock) noexcept {
  bool ran = false;
  auto next = [&] {
    return std::find_if(running_.begin(), running_.end(),
                        [](const PendingRelease& p) { return !p.started; });
  };
  for (auto it = next(); it != running_.end() && !abandoned_; it = next()) {
    it->started = true;
    const bool call = it->release != nullptr && it->ticket >= inherited_below_;
    lock.unlock();
    if (call) {
      running_release = &*it;
      it->release(it->context);  // may exit(), flush, or queue more: no lock is held
      running_release = nullptr;
    }
    lock.lock();
    const std::uint64_t flush_ticket = it->flush_ticket;
    it->points.clear();
    bool caught_up = false;
    {
      // One hold of the intake lock counts it out and keeps its node for the next push.
      std::lock_guard<SpinMutex> intake(intake_);
      --outstanding_;
      caught_up = catching_up_waiters_ != 0 && !behind_locked(backlog_limit_in_effect() / 2);
      spare_.splice(spare_.end(), running_, it);
    }
    count_out(flush_ticket, caught_up);
    ran = true;
  }
  return ran;
}

void ReleaseQueue::run() noexcept {
  on_release_thread = true;
  // Queries from this thread must never disturb a global-mode capture on another thread. A failed
  // switch is asked again before each polling round (never left as this thread's last error for a
  // deleter to find), rather than leaving the thread in global mode for good.
  bool relaxed = false;
  const auto make_relaxed = [&relaxed]() noexcept {
    if (!relaxed) {
      cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
      relaxed = succeeded_or_cleared(cuda().thread_exchange_stream_capture_mode(&mode));
    }
  };
  make_relaxed();

  auto idle = poll_interval_in_effect();  // read from the environment as the thread was started
  auto quiet = idle;
  std::unique_lock<std::mutex> lock(mutex_);
  while (!abandoned_) {
    // Options set from code meanwhile apply from this round on. The interval is a floor: the
    // backoffs below never cap a rest under it.
    const std::chrono::microseconds min_idle = poll_interval_in_effect();
    const std::uint64_t options_version = options_version_;
    const std::chrono::microseconds max_idle = std::max(kMaxIdle, min_idle);
    {
      std::lock_guard<SpinMutex> intake(intake_);
      active_.splice(active_.end(), incoming_);
    }
    if (nothing_left_to_start()) {
      if (stopping_) {
        // Closed in the same hold of the intake lock that saw it empty: a push either came
        // before (and runs: the loop goes round again) or is refused.
        std::lock_guard<SpinMutex> intake(intake_);
        if (incoming_.empty()) {
          closed_ = true;
          break;
        }
        continue;
      }
      // Nothing to do: rest longer and longer (up to kQuietMax, or the interval if longer)
      // rather than sleep until woken. A push never wakes this thread: waking a sleeping thread
      // is a system call and a cross-core interrupt (microseconds), which the application's
      // thread would pay on every drop after a quiet spell. A flush (of something queued), the
      // exit drain or new options wake it.
      quiet = std::clamp(quiet * 2, min_idle, std::max(kQuietMax, min_idle));
      wake_.wait_for(lock, quiet, [&] {
        return stopping_ || options_version_ != options_version || !intake_empty();
      });
      continue;
    }
    quiet = min_idle;
    const bool flushing = flushers_ != nullptr;
    const bool stopping = stopping_;
    const std::uint64_t inherited_below = inherited_below_;
    lock.unlock();
    make_relaxed();
    const auto started = std::chrono::steady_clock::now();
    poll_active(inherited_below);  // only this thread changes the points of active releases
    const auto spent = std::chrono::duration_cast<std::chrono::microseconds>(
        std::chrono::steady_clock::now() - started);
    lock.lock();
    move_completed_to_running();
    {
      // What is left active waits for the GPU: drops do not wait for those (see push()).
      std::lock_guard<SpinMutex> intake(intake_);
      known_waiting_ = active_.size();
    }
    if (catching_up_waiters_ != 0) {
      caught_up_.notify_all();  // they check how far behind the worker is now
    }
    const bool progressed = run_ready(lock);
    // A round's queries contend with the application's calls for the driver: the thread rests
    // at least kRestFactor times as long as they took, and new releases do not cut the rest
    // short (they join the next round); only a flush, the exit drain or new options do. The
    // deleters' time is not counted: they must run whatever the rest, and a rest scaled by it
    // lets a steady stream of releases pile up (each round's larger batch buying a longer rest,
    // up to kMaxIdle), holding memory and pooled events a millisecond past the GPU. While a
    // flush waits, the thread polls at least every kFlushRest: a flush is a thread blocked on the
    // GPU, which must not wait a whole (possibly long) interval once the GPU is done.
    idle = progressed || flushing ? min_idle : std::clamp(idle * 2, min_idle, max_idle);
    idle = std::max(idle, std::min(spent * kRestFactor, max_idle));
    // Drops waiting for this thread to catch up end any rest: it runs rounds until it has.
    if (!active_.empty() && !abandoned_ && !drops_wait_for_me()) {
      wake_.wait_for(lock, flushing ? std::min(min_idle, kFlushRest) : idle, [&] {
        return abandoned_ || stopping_ != stopping || options_version_ != options_version ||
               (flushers_ != nullptr && !flushing) || drops_wait_for_me();
      });
    }
  }
  close_locked();
  drained_.notify_all();
  caught_up_.notify_all();
}

// At exit: the worker releases everything still pending as the GPU passes it, polling as usual,
// then ends. Waiting is bounded (HOLOSCAN_DLPACK_EXIT_DRAIN_MS): past the limit, what is left is
// never run, since a deleter may wait for a lock that the exiting thread holds.
void ReleaseQueue::stop() noexcept {
  // A chain's releases waiting on the exiting thread for a level exit() left: run first, so that
  // what they queue is drained below (see unnested_release.cpp).
  run_releases_waiting_at_exit();
  // Bounded, since a deleter blocked on a lock the exiting thread holds would hang the exit.
  const std::chrono::milliseconds limit = exit_drain_setting();
  // An application's drain that waited first for the releases pending now used up part of the
  // limit: it holds for both.
  std::chrono::steady_clock::duration waited_already{0};
  {
    std::lock_guard<SpinMutex> intake(intake_);
    if (application_wait_ticket_ == next_ticket_) {
      waited_already = std::min<std::chrono::steady_clock::duration>(limit, application_waited_);
    }
  }
  const auto deadline = std::chrono::steady_clock::now() + (limit - waited_already);
  std::unique_lock<std::mutex> lock(mutex_);
  if (stopping_) {
    return;  // stopped already
  }
  stopping_ = true;
  drain_deadline_ = deadline;  // releases deferred after the drain wait no longer than it
  if (worker_ == nullptr && outstanding() == 0) {
    close_locked();
    return;
  }
  if (on_release_thread && worker_ != nullptr) {
    // A deleter called exit() on the release thread: it cannot join itself, and it will not
    // return to its loop. A fresh worker drains the rest while this thread waits for it.
    worker_->detach();
    worker_.reset();
  }
  if (!start_worker_locked()) {
    close_locked();
    abandoned_ = true;
    drained_.notify_all();  // flush() calls waiting for a worker that never comes
    caught_up_.notify_all();
    std::fprintf(stderr,
                 "holoscan-dlpack: exit drain: no release thread; %zu deferred release(s) "
                 "left un-run\n",
                 outstanding());
    return;
  }
  wake_.notify_all();
  if (!drained_.wait_until(lock, deadline, [&] { return closed_; })) {
    abandoned_ = true;
    close_locked();
    wake_.notify_all();
    drained_.notify_all();  // flush() calls waiting for the worker: the drain is over
    caught_up_.notify_all();
    // The application's share is said, since the library's own drain waited only the rest.
    char shared[96] = "";
    if (waited_already.count() > 0) {
      std::snprintf(
          shared, sizeof shared, ", %lld ms of them in the application's own drain",
          static_cast<long long>(
              std::chrono::duration_cast<std::chrono::milliseconds>(waited_already).count()));
    }
    std::fprintf(stderr,
                 "holoscan-dlpack: exit drain: %zu deferred release(s) still pending after "
                 "%lld ms (HOLOSCAN_DLPACK_EXIT_DRAIN_MS or ReleaseThreadOptions::exit_drain%s); "
                 "left un-run\n",
                 outstanding(), static_cast<long long>(limit.count()), shared);
    // The worker is left behind, never joined (the queue is never destroyed): detached, so that
    // once it leaves its loop it is not a finished thread nobody joined.
    worker_->detach();
    return;
  }
  std::unique_ptr<std::thread> worker = std::move(worker_);
  lock.unlock();
  worker->join();
}

void ReleaseQueue::prepare_fork() noexcept {
  ForkGate::close();  // no queue is made from here until the fork() is over
  locked_for_fork = existing();
  if (locked_for_fork != nullptr) {
    locked_for_fork->mutex_.lock();
    // The room for the child's copy of the worker's state, made here, in the parent: the child
    // allocates nothing in its handler (an allocator locked by a thread it lacks would hang it).
    // active_ cannot change while the lock is held.
    locked_for_fork->room_for_the_child_ =
        new (std::nothrow) unsigned char[dead_worker_bytes(locked_for_fork->active_.size())];
    locked_for_fork->intake_.lock();  // a push in progress on another thread ends first
  }
}

void ReleaseQueue::after_fork_in_parent() noexcept {
  if (ReleaseQueue* queue = std::exchange(locked_for_fork, nullptr)) {
    delete[] std::exchange(queue->room_for_the_child_, nullptr);
    queue->intake_.unlock();
    queue->mutex_.unlock();
  }
  ForkGate::open_in_parent();
}

// The child has this thread only. The locks and condition variables are made anew over the old
// ones (which may name threads that do not exist here; destroying them could block). The
// parent's releases stay counted, and a worker starts when one is needed, but they are never run
// here: their points are GPU work of the parent, which the child cannot query (CUDA is unusable
// after fork()), and a deleter of device memory would call into that unusable runtime. The child's
// copy of such memory is left to the child's exit; the parent still runs every one of them.
void ReleaseQueue::after_fork_in_child() noexcept {
  if (ReleaseQueue* queue = std::exchange(locked_for_fork, nullptr)) {
    queue->renew_in_child();
  }
  ForkGate::open_in_child();
}

namespace {

// The copies kept by forked children (the newest first, each starting with a pointer to the one
// before: a child of a child keeps its parent's too): static storage reaches them.
std::atomic<unsigned char*> states_kept_in_children{nullptr};

}  // namespace

std::size_t ReleaseQueue::dead_worker_bytes(std::size_t active) noexcept {
  return sizeof(unsigned char*) + sizeof(progress_) + sizeof(round_points_) + sizeof(worker_) +
         active * sizeof(StreamPointList);
}

// In a forked child, before renew_in_child() makes anew what the dead worker may have been
// changing: a copy of their bytes, in the room prepare_fork() made, is kept until the child exits,
// so that the heap memory they point to stays reachable (it is neither used nor freed here, and a
// leak checker run at the child's exit would otherwise report it). Nothing is kept when the heap
// refused the room.
void ReleaseQueue::keep_the_dead_workers_state() noexcept {
  unsigned char* const kept = std::exchange(room_for_the_child_, nullptr);
  if (kept == nullptr) {
    return;
  }
  unsigned char* at = kept;
  const auto copy = [&at](const void* object, std::size_t size) {
    std::memcpy(at, object, size);
    at += size;
  };
  unsigned char* const earlier = states_kept_in_children.load(std::memory_order_relaxed);
  copy(&earlier, sizeof(earlier));
  copy(&progress_, sizeof(progress_));
  copy(&round_points_, sizeof(round_points_));
  copy(&worker_, sizeof(worker_));
  for (const PendingRelease& pending : active_) {
    copy(&pending.points, sizeof(pending.points));
  }
  states_kept_in_children.store(kept, std::memory_order_relaxed);  // this thread is the only one
}

void ReleaseQueue::renew_in_child() noexcept {
  new (&mutex_) std::mutex();
  new (&intake_) SpinMutex();
  new (&wake_) std::condition_variable();
  new (&drained_) std::condition_variable();
  new (&caught_up_) std::condition_variable();
  flushers_ = nullptr;  // the parent's waiting threads do not exist here
  catching_up_waiters_ = 0;
  inherited_below_ = next_ticket_;
  if (on_release_thread) {
    keep_the_dead_workers_state();  // the room is kept too: nothing is freed in the child
    progress_.forget();
    return;  // forked from a deleter: this thread is the worker, alive in the child too
  }
  // The worker that does not exist here may have been inside a polling round, which changes its
  // own state and the points of active releases without a lock: those are made anew over the
  // copies, never read nor destroyed here (a vector caught in the middle of a reallocation would
  // otherwise be freed twice, or written after its free). What they held stays with the child.
  keep_the_dead_workers_state();
  new (&progress_) StreamProgress();
  new (&round_points_) std::vector<StreamPointList*>();
  for (PendingRelease& pending : active_) {
    new (&pending.points) StreamPointList();  // the parent's points: never queried nor pooled here
  }
  (void)worker_.release();  // a thread that does not exist here: neither joined nor destroyed
  worker_started_.store(false, std::memory_order_relaxed);  // the next push starts one
  for (PendingRelease& pending : running_) {
    pending.started = false;  // the dead worker's release in progress is dropped like the rest
  }
}

}  // namespace holoscan::detail
