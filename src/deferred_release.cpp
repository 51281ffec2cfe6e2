#include "deferred_release.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include <cuda_runtime_api.h>

#include "holoscan/deferred_release.hpp"
#include "stream_point.hpp"

namespace holoscan::detail {
namespace {

struct PendingRelease {
  StreamPointList points;
  ReleaseFunction release = nullptr;
  void* context = nullptr;
};

// Polls instead of blocking in cudaEventSynchronize: a blocked wait spins a core on default
// events and would hold back releases whose streams finish earlier.
class ReleaseQueue {
 public:
  static ReleaseQueue& instance() {
    // Leaked: the worker may still run while static destructors do; stop_at_exit joins it first.
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
      }
      incoming_.push_back(std::move(pending));
      ++outstanding_;
    } catch (...) {
      return false;
    }
    wake_.notify_one();
    return true;
  }

  void flush() noexcept {
    std::unique_lock<std::mutex> lock(mutex_);
    const std::uint64_t target = queued_total_();
    ++flushers_;
    wake_.notify_one();
    drained_.wait(lock, [&] { return completed_ >= target || stopping_; });
    --flushers_;
  }

  std::size_t outstanding() noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    return outstanding_;
  }

 private:
  ReleaseQueue() = default;

  void count_released() noexcept {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      --outstanding_;
      ++completed_;
    }
    drained_.notify_all();
  }

  std::uint64_t queued_total_() const noexcept { return completed_ + outstanding_; }

  void stop() noexcept {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    drained_.notify_all();
    if (worker_.joinable()) {
      worker_.join();
    }
  }

  void run() noexcept {
    // This thread only queries events; relaxed capture mode keeps those queries from disturbing
    // a global-mode graph capture running on another thread.
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    (void)cudaThreadExchangeStreamCaptureMode(&mode);

    std::vector<PendingRelease> active;
    auto idle = kMinIdle;
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stopping_) {
      if (active.empty() && incoming_.empty()) {
        wake_.wait(lock, [&] { return stopping_ || !incoming_.empty(); });
        continue;
      }
      for (auto& pending : incoming_) {
        active.push_back(std::move(pending));
      }
      incoming_.clear();
      lock.unlock();

      std::size_t done = 0;
      for (auto& pending : active) {
        if (drop_completed_points(pending.points)) {
          if (pending.release != nullptr) {
            pending.release(pending.context);
          }
          pending.release = nullptr;
          pending.context = nullptr;
          ++done;
          count_released();  // at once, so that pending_deferred_releases() never lags a deleter
        }
      }
      active.erase(std::remove_if(active.begin(), active.end(),
                                  [](const PendingRelease& p) { return p.points.empty(); }),
                   active.end());

      lock.lock();
      idle = done > 0 || flushers_ > 0 ? kMinIdle : std::min(idle * 2, kMaxIdle);
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
  std::vector<PendingRelease> incoming_;
  std::size_t outstanding_ = 0;
  std::uint64_t completed_ = 0;
  int flushers_ = 0;
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace

void defer_release(StreamPointList points, ReleaseFunction release, void* context) noexcept {
  PendingRelease pending{std::move(points), release, context};
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
