#include "release_queue.hpp"

#include <pthread.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <new>
#include <utility>

#include "cuda_api.hpp"
#include "stream_point.hpp"

namespace holoscan::detail {
namespace {

// True on the thread that runs releases: a deleter there that flushes, or exits the process,
// must not wait for (or join) the very thread it runs on.
thread_local bool on_release_thread = false;

constexpr long kDefaultExitDrainMs = 5000;

// How long the exit drain may wait for the GPU and for deleters; a deleter blocked on a lock the
// exiting thread holds would otherwise hang the exit forever.
std::chrono::milliseconds exit_drain_limit() noexcept {
  const char* text = std::getenv("HOLOSCAN_DLPACK_EXIT_DRAIN_MS");
  if (text == nullptr || *text == '\0') {
    return std::chrono::milliseconds(kDefaultExitDrainMs);
  }
  char* end = nullptr;
  const long ms = std::strtol(text, &end, 10);
  if (*end != '\0' || ms < 0) {
    return std::chrono::milliseconds(kDefaultExitDrainMs);
  }
  return std::chrono::milliseconds(ms);
}

}  // namespace

ReleaseQueue& ReleaseQueue::instance() noexcept {
  static ReleaseQueue* queue = [] {
    auto* created = new ReleaseQueue();
    // Registered after the CUDA runtime's own exit handler, so it runs before the runtime's
    // teardown.
    std::atexit([] { ReleaseQueue::instance().stop(); });
    (void)pthread_atfork([] { ReleaseQueue::instance().prepare_fork(); },
                         [] { ReleaseQueue::instance().after_fork_in_parent(); },
                         [] { ReleaseQueue::instance().after_fork_in_child(); });
    return created;
  }();
  return *queue;
}

bool ReleaseQueue::start_worker_locked() noexcept {
  if (worker_ != nullptr) {
    return true;
  }
  try {
    worker_ = std::make_unique<std::thread>([this] { run(); });
  } catch (...) {
    return false;
  }
  return true;
}

bool ReleaseQueue::push(PendingRelease&& pending) noexcept {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closed_ || !start_worker_locked()) {
      return false;
    }
    pending.ticket = next_ticket_;
    try {
      unfinished_.push_back(next_ticket_);
    } catch (...) {
      return false;
    }
    try {
      incoming_.push_back(std::move(pending));  // on failure `pending` is left to the caller
    } catch (...) {
      unfinished_.pop_back();
      return false;
    }
    ++next_ticket_;
  }
  wake_.notify_one();
  return true;
}

void ReleaseQueue::flush() noexcept {
  if (on_release_thread) {
    return;  // a deleter flushing from the release thread would wait for itself
  }
  std::unique_lock<std::mutex> lock(mutex_);
  const std::uint64_t target = next_ticket_;
  // unfinished_ is ordered by ticket: done once nothing older than the call is left, or once the
  // exit drain is over (what it left will never run).
  auto done = [&] { return closed_ || unfinished_.empty() || unfinished_.front() >= target; };
  // A forked child keeps the parent's releases but not its thread: start one when needed.
  if (done() || !start_worker_locked()) {
    return;
  }
  ++flushers_;
  wake_.notify_one();
  drained_.wait(lock, done);
  --flushers_;
}

std::size_t ReleaseQueue::outstanding() noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  return unfinished_.size();
}

bool ReleaseQueue::nothing_left_to_start() const noexcept {
  return incoming_.empty() && active_.empty() &&
         std::all_of(running_.begin(), running_.end(),
                     [](const PendingRelease& p) { return p.started; });
}

void ReleaseQueue::poll_active(std::uint64_t inherited_below) noexcept {
  for (PendingRelease& pending : active_) {
    if (pending.ticket < inherited_below) {
      // Queued by the parent before a fork(): see after_fork_in_child(). Its events are the
      // parent's and are forgotten, not queried nor pooled.
      pending.points.clear();
    } else {
      (void)drop_completed_points(pending.points, QueryThread::kRelease);
    }
  }
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
      it->release(it->context);  // may exit(), flush, or queue more: no lock is held
    }
    lock.lock();
    unfinished_.erase(std::find(unfinished_.begin(), unfinished_.end(), it->ticket));
    running_.erase(it);
    ran = true;
    drained_.notify_all();
  }
  return ran;
}

void ReleaseQueue::run() noexcept {
  on_release_thread = true;
  // Queries from this thread must never disturb a global-mode capture on another thread.
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  (void)cuda().thread_exchange_stream_capture_mode(&mode);

  auto idle = kMinIdle;
  std::unique_lock<std::mutex> lock(mutex_);
  while (!abandoned_) {
    active_.splice(active_.end(), incoming_);
    if (nothing_left_to_start()) {
      if (stopping_) {
        break;
      }
      wake_.wait(lock, [&] { return stopping_ || !incoming_.empty(); });
      continue;
    }
    const bool flushing = flushers_ > 0;
    const bool stopping = stopping_;
    const std::uint64_t inherited_below = inherited_below_;
    lock.unlock();
    poll_active(inherited_below);  // only this thread changes the points of active releases
    lock.lock();
    move_completed_to_running();
    const bool progressed = run_ready(lock);
    idle = progressed || flushing ? kMinIdle : std::min(idle * 2, kMaxIdle);
    if (!active_.empty() && !abandoned_) {
      wake_.wait_for(lock, idle,
                     [&] { return !incoming_.empty() || abandoned_ || stopping_ != stopping; });
    }
  }
  closed_ = true;
  drained_.notify_all();
}

// At exit: the worker releases everything still pending as the GPU passes it, polling as usual,
// then ends. Waiting is bounded (HOLOSCAN_DLPACK_EXIT_DRAIN_MS): past the limit, what is left is
// never run, since a deleter may wait for a lock that the exiting thread holds.
void ReleaseQueue::stop() noexcept {
  const std::chrono::milliseconds limit = exit_drain_limit();
  const auto deadline = std::chrono::steady_clock::now() + limit;
  std::unique_lock<std::mutex> lock(mutex_);
  stopping_ = true;
  if (worker_ == nullptr && unfinished_.empty()) {
    closed_ = true;
    return;
  }
  if (on_release_thread && worker_ != nullptr) {
    // A deleter called exit() on the release thread: it cannot join itself, and it will not
    // return to its loop. A fresh worker drains the rest while this thread waits for it.
    worker_->detach();
    worker_.reset();
  }
  if (!start_worker_locked()) {
    closed_ = true;
    abandoned_ = true;
    std::fprintf(stderr,
                 "holoscan-dlpack: exit drain: no release thread; %zu deferred release(s) "
                 "left un-run\n",
                 unfinished_.size());
    return;
  }
  wake_.notify_all();
  if (!drained_.wait_until(lock, deadline, [&] { return closed_; })) {
    abandoned_ = true;
    closed_ = true;
    wake_.notify_all();
    std::fprintf(stderr,
                 "holoscan-dlpack: exit drain: %zu deferred release(s) still pending after "
                 "%lld ms (HOLOSCAN_DLPACK_EXIT_DRAIN_MS); left un-run\n",
                 unfinished_.size(), static_cast<long long>(limit.count()));
    return;  // the worker is left behind: the queue is never destroyed, so it needs no join
  }
  std::unique_ptr<std::thread> worker = std::move(worker_);
  lock.unlock();
  worker->join();
}

void ReleaseQueue::prepare_fork() noexcept { mutex_.lock(); }

void ReleaseQueue::after_fork_in_parent() noexcept { mutex_.unlock(); }

// The child has this thread only. The lock and condition variables are made anew over the old
// ones (which may name threads that do not exist here; destroying them could block). The
// parent's releases stay counted, and a worker starts when one is needed, but they are never run
// here: their points are GPU work of the parent, which the child cannot query (CUDA is unusable
// after fork()), and a deleter of device memory would call into that unusable runtime. The child's
// copy of such memory is left to the child's exit; the parent still runs every one of them.
void ReleaseQueue::after_fork_in_child() noexcept {
  new (&mutex_) std::mutex();
  new (&wake_) std::condition_variable();
  new (&drained_) std::condition_variable();
  flushers_ = 0;
  inherited_below_ = next_ticket_;
  if (on_release_thread) {
    return;  // forked from a deleter: this thread is the worker, alive in the child too
  }
  (void)worker_.release();  // a thread that does not exist here: neither joined nor destroyed
  for (PendingRelease& pending : running_) {
    pending.started = false;  // the dead worker's release in progress is dropped like the rest
  }
}

}  // namespace holoscan::detail
