// Covers SpinMutex against a real-time waiter: an application thread under SCHED_FIFO (as a
// Holoscan operator thread may run) must not keep a normal thread holding the lock off its CPU.
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "spin_mutex.hpp"

namespace holoscan {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

// The CPUs this process may run on.
std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (CPU_ISSET(cpu, &set)) {
        cpus.push_back(cpu);
      }
    }
  }
  return cpus;
}

bool pin_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

// A holder (normal scheduling) takes the lock and wakes a SCHED_FIFO waiter on the same CPU,
// which preempts it at once and asks for the lock. Spinning and sched_yield() never give that
// CPU back to a thread of a lower class, and short sleeps not reliably on a loaded host: only the
// kernel's real-time throttling (by default 50 ms of each second, after 950 ms; none where it is
// turned off, as on tuned real-time hosts) would let the holder finish. A watchdog on another CPU
// demotes the waiter past the limit, so that a failure ends instead of hanging.
TEST(SpinMutex, RealTimeWaiterLetsANormalHolderOnItsCpuFinish) {
  const std::vector<int> cpus = allowed_cpus();
  if (cpus.size() < 2) {
    GTEST_SKIP() << "needs two CPUs: one shared by the holder and the waiter, one for a watchdog";
  }
  constexpr milliseconds kLimit{600};  // under the throttling's 950 ms
  detail::SpinMutex mutex;
  sem_t go;
  ASSERT_EQ(sem_init(&go, 0, 0), 0);
  std::atomic<int> waiter_ready{0};  // 1: real-time and pinned; -1: not permitted
  std::atomic<bool> acquired{false};
  std::atomic<long long> waited_ms{-1};
  std::thread waiter([&] {
    sched_param param{};
    param.sched_priority = 1;
    if (!pin_to(cpus[0]) || pthread_setschedparam(pthread_self(), SCHED_FIFO, &param) != 0) {
      waiter_ready.store(-1);
      return;
    }
    waiter_ready.store(1);
    while (sem_wait(&go) != 0) {
    }
    const auto start = steady_clock::now();
    mutex.lock();
    mutex.unlock();
    waited_ms.store(std::chrono::duration_cast<milliseconds>(steady_clock::now() - start).count());
    acquired.store(true);
  });
  while (waiter_ready.load() == 0) {
    std::this_thread::yield();
  }
  if (waiter_ready.load() < 0) {
    waiter.join();
    sem_destroy(&go);
    GTEST_SKIP() << "SCHED_FIFO on a pinned thread is not permitted here (CAP_SYS_NICE)";
  }
  std::atomic<bool> rescued{false};
  std::thread watchdog([&] {
    (void)pin_to(cpus[1]);
    const auto deadline = steady_clock::now() + kLimit;
    while (!acquired.load() && steady_clock::now() < deadline) {
      std::this_thread::sleep_for(milliseconds(1));
    }
    if (!acquired.load()) {
      rescued.store(true);
      sched_param normal{};
      (void)pthread_setschedparam(waiter.native_handle(), SCHED_OTHER, &normal);
    }
  });
  std::thread holder([&] {
    ASSERT_TRUE(pin_to(cpus[0]));
    mutex.lock();
    sem_post(&go);  // the waiter preempts this thread here, while it holds the lock
    mutex.unlock();
  });
  holder.join();
  waiter.join();
  watchdog.join();
  sem_destroy(&go);
  EXPECT_FALSE(rescued.load()) << "the real-time waiter kept the holder off its CPU past "
                               << kLimit.count() << " ms (waited " << waited_ms.load() << " ms)";
}

// Threads that contend for the lock all the time (spinners, sleepers and the wakes between them)
// never lose an increment and all finish.
TEST(SpinMutex, ContendedIncrementsAreNeverLost) {
  constexpr int kThreads = 6;
  constexpr int kIncrements = 200000;
  detail::SpinMutex mutex;
  long long counter = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kIncrements; ++i) {
        std::lock_guard<detail::SpinMutex> lock(mutex);
        ++counter;
      }
    });
  }
  for (std::thread& thread : threads) {
    thread.join();
  }
  EXPECT_EQ(counter, static_cast<long long>(kThreads) * kIncrements);
  EXPECT_TRUE(mutex.try_lock()) << "the lock is free once every thread is done";
  mutex.unlock();
}

// A waiter asleep in one lock is counted in that lock only: an unlock of any other lock finds no
// one to wake and makes no wake call, and the holder's unlock wakes the sleeper, which then holds
// the lock.
TEST(SpinMutex, ASleeperIsCountedInItsOwnLockOnly) {
  detail::SpinMutex contended;
  detail::SpinMutex other;
  contended.lock();
  std::atomic<bool> acquired{false};
  std::thread waiter([&] {
    contended.lock();
    acquired.store(true);
    contended.unlock();
  });
  const auto deadline = steady_clock::now() + std::chrono::seconds(10);
  std::uint32_t seen = 0;  // the waiter leaves the count for an instant each time it wakes
  while ((seen = contended.sleepers()) == 0 && steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  EXPECT_EQ(seen, 1u) << "the waiter went to sleep in the contended lock";
  EXPECT_EQ(other.sleepers(), 0u) << "another lock counts no sleeper";
  for (int i = 0; i < 1000; ++i) {
    std::lock_guard<detail::SpinMutex> lock(other);
  }
  EXPECT_FALSE(acquired.load()) << "unlocking another lock let no one into the contended one";
  contended.unlock();
  waiter.join();
  EXPECT_TRUE(acquired.load());
  EXPECT_EQ(contended.sleepers(), 0u) << "the woken waiter is no longer counted";
}

}  // namespace
}  // namespace holoscan
