#include "deferred_release.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <list>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "cuda_api.hpp"
#include "holoscan/deferred_release.hpp"
#include "stream_point.hpp"

namespace holoscan::detail {
namespace {

struct PendingRelease {
  StreamPointList points;
  ReleaseFunction release = nullptr;
  void* context = nullptr;
  std::uint64_t ticket = 0;  // order of arrival, for flush
};

// One thread polls the pending releases instead of blocking in cudaEventSynchronize: a blocked
// wait spins a core on default events and would hold back releases whose streams finish earlier.
class ReleaseQueue {
 public:
  static ReleaseQueue& instance() {
    // Leaked on purpose: static destructors may still release owners. The worker is stopped,
    // and what it still holds is released, from an atexit handler instead.
    static ReleaseQueue* queue = [] {
      auto* created = new ReleaseQueue();
      std::atexit([] { ReleaseQueue::instance().stop(); });
      return created;
    }();
    return *queue;
  }

  bool push(PendingRelease&& pending) noexcept {
    try {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopping_) {
        return false;
      }
      if (!worker_.joinable()) {
        worker_ = std::thread([this] { run(); });
        worker_id_ = worker_.get_id();
      }
      pending.ticket = next_ticket_;
      unfinished_.push_back(next_ticket_);  // may throw: nothing has changed yet
      try {
        incoming_.push_back(std::move(pending));
      } catch (...) {
        unfinished_.pop_back();
        throw;
      }
      ++next_ticket_;
    } catch (...) {
      return false;
    }
    wake_.notify_one();
    return true;
  }

  void flush() noexcept {
    std::unique_lock<std::mutex> lock(mutex_);
    if (std::this_thread::get_id() == worker_id_) {
      return;  // a deleter flushing from the release thread would wait for itself
    }
    const std::uint64_t target = next_ticket_;
    ++flushers_;
    wake_.notify_one();
    // unfinished_ is ordered by ticket: done once nothing older than the call is left.
    drained_.wait(lock, [&] { return unfinished_.empty() || unfinished_.front() >= target; });
    --flushers_;
  }

  std::size_t outstanding() noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    return unfinished_.size();
  }

 private:
  ReleaseQueue() = default;

  void finished(std::uint64_t ticket) noexcept {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      unfinished_.erase(std::find(unfinished_.begin(), unfinished_.end(), ticket));
    }
    drained_.notify_all();
  }

  // At exit: the worker releases everything still pending (waiting for the GPU), then ends. This
  // runs before the CUDA runtime's own teardown, which registered its handler earlier.
  void stop() noexcept {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    if (worker_.joinable()) {
      worker_.join();
    }
  }

  void run_release(PendingRelease& pending) noexcept {
    if (pending.release != nullptr) {
      pending.release(pending.context);
    }
    finished(pending.ticket);
  }

  void run() noexcept {
    // Queries from this thread must never disturb a global-mode capture on another thread.
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    (void)cuda().thread_exchange_stream_capture_mode(&mode);

    std::list<PendingRelease> active;
    auto idle = kMinIdle;
    std::unique_lock<std::mutex> lock(mutex_);
    while (true) {
      if (active.empty() && incoming_.empty() && !stopping_) {
        wake_.wait(lock, [&] { return stopping_ || !incoming_.empty(); });
      }
      active.splice(active.end(), incoming_);  // no allocation: nodes move over
      const bool stopping = stopping_;
      const bool flushing = flushers_ > 0;
      lock.unlock();

      bool progressed = false;
      for (auto& pending : active) {
        if (stopping) {
          wait_and_drop_points(pending.points, QueryThread::kRelease);
        }
        if (drop_completed_points(pending.points, QueryThread::kRelease)) {
          run_release(pending);
          progressed = true;
        }
      }
      active.remove_if([](const PendingRelease& p) { return p.points.empty(); });

      lock.lock();
      if (stopping && incoming_.empty()) {
        return;
      }
      idle = progressed || flushing ? kMinIdle : std::min(idle * 2, kMaxIdle);
      if (!active.empty()) {
        wake_.wait_for(lock, idle, [&] { return stopping_ || !incoming_.empty(); });
      }
    }
  }

  static constexpr std::chrono::microseconds kMinIdle{20};
  static constexpr std::chrono::microseconds kMaxIdle{1000};

  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable drained_;
  std::list<PendingRelease> incoming_;
  std::vector<std::uint64_t> unfinished_;  // tickets queued and not yet released, ascending
  std::uint64_t next_ticket_ = 0;
  int flushers_ = 0;
  bool stopping_ = false;
  std::thread worker_;
  std::thread::id worker_id_;
};

}  // namespace

void defer_release(StreamPointList points, ReleaseFunction release, void* context) noexcept {
  PendingRelease pending{std::move(points), release, context, 0};
  if (ReleaseQueue::instance().push(std::move(pending))) {
    return;
  }
  // The queue could not take it (out of memory, or the process is exiting): wait here rather
  // than release memory the GPU may still use.
  wait_and_drop_points(pending.points);
  if (release != nullptr) {
    release(context);
  }
}

}  // namespace holoscan::detail

namespace holoscan {

void flush_deferred_releases() noexcept { detail::ReleaseQueue::instance().flush(); }

std::size_t pending_deferred_releases() noexcept {
  return detail::ReleaseQueue::instance().outstanding();
}

}  // namespace holoscan
