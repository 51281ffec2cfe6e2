// Events that threads take and give back are never kept by a thread and so never lost for good:
// not when a table swap comes while the thread is alive, not when the thread records once more as
// it ends (after its other thread_locals are gone), not on the release thread after a deleter
// recorded; and threads never make the pool create events that a reservation already made. (A
// per-thread cache of free events failed all four.)
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include "holoscan/cuda_stream_sync.hpp"
#include "holoscan/event_pool.hpp"
#include "stream/pooled_events.hpp"
#include "support/callback_tensor.hpp"
#include "support/fake_cuda_test.hpp"

namespace holoscan {
namespace {

using test::FakeCuda;

// A thread that took events, then waits (keeping them) until it is told to end.
class Keeper {
 public:
  explicit Keeper(cudaStream_t producer, cudaStream_t consumer)
      : thread_([this, producer, consumer] {
          (void)synchronize_cuda_streams(producer, consumer);  // takes and keeps a few
          std::unique_lock<std::mutex> lock(mutex_);
          step_ = 1;
          changed_.notify_all();
          changed_.wait(lock, [&] { return step_ == 2; });
        }) {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return step_ == 1; });
  }
  Keeper(const Keeper&) = delete;
  Keeper& operator=(const Keeper&) = delete;
  ~Keeper() { end(); }

  void end() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      step_ = 2;
      changed_.notify_all();
    }
    if (thread_.joinable()) {
      thread_.join();
    }
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  int step_ = 0;
  std::thread thread_;
};

class EventPoolThreadCache : public test::FakeCudaTest {};

class EventPoolThreadCacheDeathTest : public test::FakeCudaTest {
 protected:
  void SetUp() override {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    FakeCudaTest::SetUp();
  }
};

// Once every thread that took events has ended: what is still held, and alive in the fake.
// In a child process, since events lost for good would be counted in every later test's scope.
[[noreturn]] void report_and_exit(FakeCuda& fake) {
  fake.complete_all();
  flush_deferred_releases();
  const std::size_t held = detail::destroy_free_events();
  const std::size_t alive = fake.live_events();
  std::fprintf(stderr, "held %zu, alive %zu\n", held, alive);
  std::_Exit(held == 0 && alive == 0 ? 0 : 1);
}

[[noreturn]] void swap_while_a_thread_keeps_events(FakeCuda& fake) {
  cudaStream_t producer = fake.create_stream(0);
  cudaStream_t consumer = fake.create_stream(0);
  Keeper keeper(producer, consumer);
  // FakeCudaScope's end (a table swap) while the keeper still keeps its events: counted as held,
  // as documented. They must be given back, or destroyed, once the keeper ends.
  std::fprintf(stderr, "held at the swap %zu\n", detail::destroy_free_events());
  keeper.end();
  report_and_exit(fake);
}

// Fails on hop: the keeper's events are "stale" once the swap bumped the generation, and its
// ThreadEvents destructor forgets them without destroying them or uncounting them, so every later
// destroy_free_events() reports them as held (and every later FakeCudaScope fails), and the fake
// keeps them alive.
TEST_F(EventPoolThreadCacheDeathTest, EventsKeptAcrossATableSwapAreNotHeldForeverOnceTheThreadEnds) {
  EXPECT_EXIT(swap_while_a_thread_keeps_events(fake()), ::testing::ExitedWithCode(0),
              "held 0, alive 0");
}

[[noreturn]] void record_from_a_deleter(FakeCuda& fake) {
  cudaStream_t producer = fake.create_stream(0);
  cudaStream_t consumer = fake.create_stream(0);
  test::drop_pending(fake, test::make_callback_tensor([producer, consumer] {
                       (void)synchronize_cuda_streams(producer, consumer);  // a hand-over as it goes
                     }),
                     producer);
  report_and_exit(fake);
}

// Fails on hop: a deleter runs on the release thread, so the release thread does take events
// (pooled_events.hpp says it never does) and keeps them for good: "held 1, alive 1" at every
// scope's end, and forgotten (as above) at the first table swap.
TEST_F(EventPoolThreadCacheDeathTest, ADeleterThatRecordsLeavesTheReleaseThreadHoldingNoEvent) {
  EXPECT_EXIT(record_from_a_deleter(fake()), ::testing::ExitedWithCode(0), "held 0, alive 0");
}

// A thread_local made before the thread's first event: destroyed after the thread's own events
// went back, and it records once more (a stream hand-over as it goes).
struct SyncsAsTheThreadEnds {
  cudaStream_t producer = nullptr;
  cudaStream_t consumer = nullptr;
  ~SyncsAsTheThreadEnds() {
    if (producer != nullptr) {
      (void)synchronize_cuda_streams(producer, consumer);
    }
  }
};

[[noreturn]] void record_after_the_thread_cache_is_gone(FakeCuda& fake) {
  cudaStream_t producer = fake.create_stream(0);
  cudaStream_t consumer = fake.create_stream(0);
  if (!reserve_stream_events(0, 4).has_value()) {  // free in the pool: this thread keeps none
    std::_Exit(3);
  }
  std::thread worker([&] {
    thread_local SyncsAsTheThreadEnds late;
    late.producer = producer;
    late.consumer = consumer;
    (void)synchronize_cuda_streams(producer, consumer);
  });
  worker.join();
  report_and_exit(fake);
}

// Fails on hop: after ~ThreadEvents, acquire_event() takes a batch into the destroyed cache
// (take_from() sets its device again) and release_event() puts the event back there: every event
// it took is lost for good (held forever, never destroyed).
TEST_F(EventPoolThreadCacheDeathTest, ARecordAfterTheThreadsCacheWasDestroyedLosesNoEvent) {
  EXPECT_EXIT(record_after_the_thread_cache_is_gone(fake()), ::testing::ExitedWithCode(0),
              "held 0, alive 0");
}

// One event in flight at a time, on two threads, after reserving two: no third may be made on
// the hot path. Fails on hop: the first thread takes both into its own cache (a batch of up to
// eight for the one it needs) and keeps them while alive, so the second makes a third.
TEST_F(EventPoolThreadCache, ReservedEventsServeEveryThreadWithoutMakingMore) {
  cudaStream_t producer = fake().create_stream(0);
  cudaStream_t consumer = fake().create_stream(0);
  ASSERT_TRUE(reserve_stream_events(0, 2).has_value());  // this thread keeps none: both are free
  ASSERT_EQ(created_stream_events(0), 2u);
  Keeper keeper(producer, consumer);
  EXPECT_TRUE(synchronize_cuda_streams(producer, consumer).has_value());
  EXPECT_EQ(created_stream_events(0), 2u);
}

}  // namespace
}  // namespace holoscan
