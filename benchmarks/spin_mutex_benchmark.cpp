// The library's internal lock, uncontended, while another lock of the process has a waiter asleep
// in it (as in an oversubscribed pipeline, where one lock is contended and the rest are not): an
// unlock wakes only its own lock's sleepers, so this costs what a lone lock and unlock cost.
// Runs without a GPU.
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include <benchmark/benchmark.h>

#include "spin_mutex.hpp"

namespace {

using holoscan::detail::SpinMutex;

// Holds `contended` with one waiter asleep in it for as long as it lives.
class SleeperElsewhere {
 public:
  explicit SleeperElsewhere(SpinMutex& contended) : contended_(contended) {
    contended_.lock();
    waiter_ = std::thread([this] { std::lock_guard<SpinMutex> lock(contended_); });
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (contended_.sleepers() == 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
    asleep_ = contended_.sleepers() != 0;
  }
  ~SleeperElsewhere() {
    contended_.unlock();
    waiter_.join();
  }
  SleeperElsewhere(const SleeperElsewhere&) = delete;
  SleeperElsewhere& operator=(const SleeperElsewhere&) = delete;
  bool asleep() const { return asleep_; }

 private:
  SpinMutex& contended_;
  std::thread waiter_;
  bool asleep_ = false;
};

void BM_SpinMutex_LockUnlock(benchmark::State& state) {
  SpinMutex mutex;
  for (auto _ : state) {
    mutex.lock();
    mutex.unlock();
  }
}
BENCHMARK(BM_SpinMutex_LockUnlock);

void BM_SpinMutex_LockUnlock_WhileAnotherLockHasASleeper(benchmark::State& state) {
  SpinMutex contended;
  SleeperElsewhere sleeper(contended);
  if (!sleeper.asleep()) {
    state.SkipWithError("the waiter did not go to sleep in the other lock");
    return;
  }
  SpinMutex mutex;
  for (auto _ : state) {
    mutex.lock();
    mutex.unlock();
  }
}
BENCHMARK(BM_SpinMutex_LockUnlock_WhileAnotherLockHasASleeper);

}  // namespace
