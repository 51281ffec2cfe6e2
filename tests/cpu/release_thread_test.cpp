// Covers the release thread against the fake runtime: deleters that re-enter the library or exit
// the process, the bounded drain at exit, and fork() with releases pending or running.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "cuda/cuda_api.hpp"
#include "holoscan/deferred_release.hpp"
#include "holoscan/dlpack.hpp"
#include "stream/release_queue.hpp"
#include "support/allocation_hooks.hpp"
#include "support/callback_tensor.hpp"
#include "support/counting_producer.hpp"
#include "support/fake_cuda_test.hpp"
#include "support/forked_child.hpp"
#include "support/thread_sanitizer.hpp"

namespace holoscan {
namespace {

using test::run_forked;
using test::start_forked;
using test::wait_forked;

using test::CountingProducer;
using test::CudaEntry;
using test::drop_pending;
using test::FakeCuda;
using test::make_callback_tensor;

using Buffer = DLManagedMemoryBufferVersioned;

class ReleaseThread : public test::FakeCudaTest {};

// An owner dropped pending on `outer_stream` whose deleter drops the last owner of the producer's
// tensor, itself pending on `inner_stream`: one release queued, the other to be queued by it.
struct NestedReleases {
  CountingProducer producer;
  cudaStream_t outer_stream = nullptr;
  cudaStream_t inner_stream = nullptr;
  std::shared_ptr<std::atomic<bool>> outer_ran =  // outlives a failed wait of a test
      std::make_shared<std::atomic<bool>>(false);

  void queue(FakeCuda& fake) {
    outer_stream = fake.create_stream(0);
    inner_stream = fake.create_stream(0);
    auto inner = std::make_shared<Buffer>(producer.make_versioned());
    fake.launch(inner_stream);
    ASSERT_TRUE(inner->set_deallocation_stream(inner_stream));
    drop_pending(fake, make_callback_tensor([inner, ran = outer_ran]() mutable {
                   inner.reset();
                   ran->store(true);
                 }),
                 outer_stream);
    inner.reset();  // the outer deleter now holds the last owner
    ASSERT_EQ(pending_deferred_releases(), 1u);
  }
};

TEST_F(ReleaseThread, DeleterThatDropsAnotherOwnerQueuesItsRelease) {
  NestedReleases nested;
  ASSERT_NO_FATAL_FAILURE(nested.queue(fake()));
  CountingProducer& producer = nested.producer;
  cudaStream_t outer_stream = nested.outer_stream;
  cudaStream_t inner_stream = nested.inner_stream;
  const std::shared_ptr<std::atomic<bool>> outer_ran = nested.outer_ran;

  fake().complete(outer_stream);
  // Not a flush: once the release thread has run the outer deleter, the inner release it queued
  // counts as queued before the flush, which would then wait for inner_stream for ever.
  ASSERT_TRUE(
      test::eventually([&] { return outer_ran->load() && pending_deferred_releases() == 1u; }));
  EXPECT_EQ(producer.deleter_calls(), 0);  // dropped on the release thread, deferred from there
  EXPECT_EQ(pending_deferred_releases(), 1u);

  fake().complete(inner_stream);
  flush_deferred_releases();
  EXPECT_EQ(producer.deleter_calls(), 1);
  EXPECT_EQ(pending_deferred_releases(), 0u);
}

// A flush waiting for a release waits for what that release's deleter deferred in turn (a pool's
// memory, freed as the export of its last block goes): returning between the two would leave the
// caller's shutdown check with a release still pending.
TEST_F(ReleaseThread, AFlushWaitsForTheReleasesADeleterItWaitsForDeferred) {
  NestedReleases nested;
  ASSERT_NO_FATAL_FAILURE(nested.queue(fake()));
  CountingProducer& producer = nested.producer;
  const std::shared_ptr<std::atomic<bool>> outer_ran = nested.outer_ran;

  std::atomic<bool> flushed{false};
  std::atomic<int> deleter_calls_at_return{-1};
  std::thread flusher([&] {
    flush_deferred_releases();
    deleter_calls_at_return.store(producer.deleter_calls());
    flushed.store(true);
  });
  // The flush waits (registered before the outer release runs) when the outer stream completes.
  EXPECT_TRUE(
      test::eventually([] { return detail::ReleaseQueue::instance().waiting_flushes() == 1u; }));
  fake().complete(nested.outer_stream);
  ASSERT_TRUE(test::eventually([&] { return outer_ran->load(); }));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(flushed.load());  // the inner release still waits for its stream
  EXPECT_EQ(pending_deferred_releases(), 1u);

  fake().complete(nested.inner_stream);
  flusher.join();
  EXPECT_EQ(deleter_calls_at_return.load(), 1);
  EXPECT_EQ(pending_deferred_releases(), 0u);
}

// With no room in the release queue (every finished node in use, the heap refusing a new one),
// an owner's drop waits for its points here, then runs the deleter: once, and never before the
// GPU passed them.
// Drops pending owners until one needed a new node of the release queue: the queue keeps every
// finished node for reuse, and tests run before in the same process may have left many (a limit
// of time, not of drops). False if none did within 20 s.
bool use_up_the_queues_spare_nodes(cudaStream_t pending) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < give_up) {
    auto buffer = std::make_unique<Buffer>(make_callback_tensor([] {}));
    if (!buffer->set_deallocation_stream(pending)) {
      return false;
    }
    test::NewCounter counter;
    buffer.reset();
    if (counter.calls() > 0) {
      return true;
    }
  }
  return false;
}

// A deleter that counts its runs and notes one before the "GPU" finished, and a thread that
// finishes the GPU's work (then `after`) 50 ms on, while the test's thread waits in a drop.
struct DeleterAgainstTheGpu {
  std::atomic<bool> gpu_done{false};
  std::atomic<int> runs{0};
  std::atomic<bool> ran_early{false};

  DLManagedTensorVersioned* tensor() {
    return make_callback_tensor([this] {
      ran_early.store(ran_early.load() || !gpu_done.load());
      runs.fetch_add(1);
    });
  }
  template <class After>
  std::thread finish_later(FakeCuda& fake, cudaStream_t stream, After after) {
    return std::thread([this, &fake, stream, after] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      gpu_done.store(true);
      fake.complete(stream);
      after();
    });
  }
};

TEST_F(ReleaseThread, ADropWithNoRoomInTheQueueWaitsForItsPointsHere) {
  cudaStream_t stream = fake().create_stream(0);
  fake().launch(stream);  // completed only at the end: every release below stays pending
  ASSERT_TRUE(use_up_the_queues_spare_nodes(stream));
  DeleterAgainstTheGpu deleter;
  auto buffer = std::make_unique<Buffer>(deleter.tensor());
  ASSERT_TRUE(buffer->set_deallocation_stream(stream));
  std::thread gpu = deleter.finish_later(fake(), stream, [] {});
  std::uint64_t failed = 0;
  {
    test::FailingAllocations failing(0, 1000);
    buffer.reset();
    failed = failing.failed();
  }
  gpu.join();
  EXPECT_GE(failed, 1u);  // the queue was refused its node
  EXPECT_EQ(deleter.runs.load(), 1);
  EXPECT_FALSE(deleter.ran_early.load());
  flush_deferred_releases();
}

// The same wait, refused by a capture: this thread could not leave global capture mode, and
// another stream captures meanwhile, so CUDA refuses the host wait, which says nothing about the
// GPU. That refusal counted as the point passed, and the deleter ran while the GPU still used
// the memory; the wait now asks again until the point passes.
TEST_F(ReleaseThread, ADropWaitingHereThatACaptureRefusesStillWaitsForTheGpu) {
  cudaStream_t stream = fake().create_stream(0);
  cudaStream_t captured = fake().create_stream(0);
  fake().launch(stream);
  ASSERT_TRUE(use_up_the_queues_spare_nodes(stream));
  DeleterAgainstTheGpu deleter;
  auto buffer = std::make_unique<Buffer>(deleter.tensor());
  ASSERT_TRUE(buffer->set_deallocation_stream(stream));
  fake().set_capture(captured, cudaStreamCaptureStatusActive);  // begun in global mode
  fake().fail_next(CudaEntry::kThreadExchangeStreamCaptureMode, cudaErrorUnknown, 1000);
  const std::uint64_t refused_before = fake().calls(CudaEntry::kEventSynchronize);
  std::thread gpu = deleter.finish_later(
      fake(), stream, [&] { fake().set_capture(captured, cudaStreamCaptureStatusNone); });
  {
    test::FailingAllocations failing(0, 1000);
    buffer.reset();
  }
  gpu.join();
  fake().clear_faults();
  EXPECT_GT(fake().calls(CudaEntry::kEventSynchronize), refused_before)
      << "the drop did not wait here (the test shows nothing then)";
  EXPECT_EQ(deleter.runs.load(), 1);
  EXPECT_FALSE(deleter.ran_early.load()) << "the deleter ran before the GPU passed its point";
  flush_deferred_releases();
}

TEST_F(ReleaseThread, DeleterThatFlushesReturnsAtOnce) {
  CountingProducer producer;
  cudaStream_t stream = fake().create_stream(0);
  cudaStream_t never_done = fake().create_stream(0);
  drop_pending(fake(), producer.make_versioned(), never_done);  // a release the flush cannot end
  std::atomic<int> flushes_returned{0};
  drop_pending(fake(), make_callback_tensor([&] {
                 flush_deferred_releases();
                 flushes_returned.fetch_add(1);
               }),
               stream);

  fake().complete(stream);
  // The flushing release is counted out just after its deleter returns.
  ASSERT_TRUE(test::eventually(
      [&] { return flushes_returned.load() == 1 && pending_deferred_releases() == 1; }));
  EXPECT_EQ(producer.deleter_calls(), 0);

  fake().complete(never_done);
  flush_deferred_releases();
  EXPECT_EQ(producer.deleter_calls(), 1);
  EXPECT_EQ(flushes_returned.load(), 1);
}

constexpr std::chrono::seconds kChildLimit{20};

// In a child: a release queued there runs on a release thread started there. Returns a bit per
// failed check (8 and up).
int child_checks_own_release(FakeCuda& fake) {
  int failed = 0;
  CountingProducer producer;
  cudaStream_t stream = fake.create_stream(0);
  {
    Buffer buffer(producer.make_versioned());
    fake.launch(stream);
    if (!buffer.set_deallocation_stream(stream)) failed |= 8;
  }
  if (pending_deferred_releases() != 1) failed |= 16;
  fake.complete(stream);
  flush_deferred_releases();
  if (producer.deleter_calls() != 1) failed |= 32;
  if (producer.last_deleter_thread() == std::this_thread::get_id()) failed |= 64;
  return failed;
}

// In a child: the parent's pending releases are dropped by a flush, and a release queued in the
// child runs on a release thread started there. Returns a bit per failed check.
int child_checks(FakeCuda& fake, const CountingProducer& parent_producer) {
  int failed = 0;
  if (pending_deferred_releases() != 1) failed |= 1;
  flush_deferred_releases();  // hung before: the parent's release thread does not exist here
  if (pending_deferred_releases() != 0) failed |= 2;
  if (parent_producer.deleter_calls() != 0) failed |= 4;  // the parent's to run, not ours

  return failed | child_checks_own_release(fake);
}

TEST_F(ReleaseThread, ForkWithAReleasePendingNeitherHangsNorRunsItInTheChild) {
#if defined(__SANITIZE_ADDRESS__)
  // The parent's release thread polls the pending release and frees memory as it goes; g++ 12's
  // AddressSanitizer allocator is not fork-safe, so a fork that lands there leaves its lock held
  // in the child (seen: the child's release thread blocked in the allocator). The default and
  // ThreadSanitizer builds run this test.
  GTEST_SKIP() << "AddressSanitizer's allocator can deadlock a child forked mid-allocation";
#endif
  CountingProducer producer;
  cudaStream_t stream = fake().create_stream(0);
  drop_pending(fake(), producer.make_versioned(), stream);
  ASSERT_EQ(pending_deferred_releases(), 1u);

  EXPECT_EQ(run_forked([&] { return child_checks(fake(), producer); }, kChildLimit), 0)
      << "-1: the child hung; otherwise the bits of child_checks that failed";

  EXPECT_EQ(producer.deleter_calls(), 0);
  fake().complete(stream);
  flush_deferred_releases();
  EXPECT_EQ(producer.deleter_calls(), 1);
}

// A child forked once the release thread has run leaves nothing a leak checker reports when it
// exits normally: what the parent's worker held (its polling state, the thread object), which the
// child neither uses nor frees, stays reachable. LeakSanitizer failed such a child (status 1);
// only a LeakSanitizer build can tell, the others check that the child exits cleanly.
TEST_F(ReleaseThread, AChildExitingNormallyAfterTheWorkerRanLeavesNoLeak) {
  CountingProducer producer;
  cudaStream_t stream = fake().create_stream(0);
  drop_pending(fake(), producer.make_versioned(), stream);  // starts the worker, which polls it
  fake().complete(stream);
  flush_deferred_releases();
  ASSERT_EQ(producer.deleter_calls(), 1);
  const pid_t child = fork();
  if (child == 0) {
    std::exit(0);  // exit handlers (and a leak checker's) run in the child
  }
  EXPECT_EQ(wait_forked(child, std::chrono::steady_clock::now() + kChildLimit), 0);
}

TEST_F(ReleaseThread, ForkWhileADeleterRunsDoesNotRunItAgainInTheChild) {
  std::atomic<bool> entered{false};
  std::atomic<bool> may_finish{false};
  std::atomic<int> finished{0};
  cudaStream_t stream = fake().create_stream(0);
  drop_pending(fake(), make_callback_tensor([&] {
                 entered.store(true);
                 while (!may_finish.load()) {
                   std::this_thread::yield();
                 }
                 finished.fetch_add(1);
               }),
               stream);
  fake().complete(stream);
  ASSERT_TRUE(test::eventually([&] { return entered.load(); }));

  const int status = run_forked(
      [&] {
        flush_deferred_releases();  // the running release is the dead thread's: dropped
        return (pending_deferred_releases() == 0 ? 0 : 1) | (finished.load() == 0 ? 0 : 2);
      },
      kChildLimit);
  EXPECT_EQ(status, 0) << "-1: the child hung";

  may_finish.store(true);
  flush_deferred_releases();
  EXPECT_EQ(finished.load(), 1);
}

// The worker rests a whole poll interval between rounds while a release is pending; a shorter
// interval set from code ends a long rest under way instead of waiting it out.
TEST_F(ReleaseThread, ShorterPollIntervalSetFromCodeEndsTheRestUnderWay) {
  ReleaseThreadOptions slow;
  slow.poll_interval = std::chrono::seconds(1);
  ASSERT_TRUE(set_release_thread_options(slow));
  CountingProducer producer;
  cudaStream_t stream = fake().create_stream(0);
  drop_pending(fake(), producer.make_versioned(), stream);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // into a rest of 1 s
  ASSERT_TRUE(set_release_thread_options({}));
  const auto completed_at = std::chrono::steady_clock::now();
  fake().complete(stream);
  ASSERT_TRUE(test::eventually([&] { return producer.deleter_calls() == 1; }));
  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - completed_at);
  EXPECT_LT(waited.count(), 600) << "the release waited out the rest begun under the 1 s interval";
}

// Threads drop owners (each push takes only the intake lock) while each of them flushes now and
// then: a flush returns only once every release its thread queued before it has run, and every
// deleter runs exactly once.
TEST_F(ReleaseThread, ConcurrentDropsAndFlushesRunEveryDeleterOnce) {
  constexpr int kThreads = 4;
  constexpr int kDrops = 400;
  constexpr int kFlushEvery = 25;
  std::array<CountingProducer, kThreads> producers;
  std::array<cudaStream_t, kThreads> streams{};
  for (auto& stream : streams) {
    stream = fake().create_stream(0);
  }
  std::atomic<int> early_flushes{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 1; i <= kDrops; ++i) {
        drop_pending(fake(), producers[t].make_versioned(), streams[t]);
        fake().complete(streams[t]);
        if (i % kFlushEvery == 0) {
          flush_deferred_releases();
          early_flushes.fetch_add(producers[t].deleter_calls() == i ? 0 : 1);
        }
      }
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  flush_deferred_releases();
  EXPECT_EQ(early_flushes.load(), 0) << "a flush returned before its own releases ran";
  for (const auto& producer : producers) {
    EXPECT_EQ(producer.deleter_calls(), kDrops);
  }
  EXPECT_EQ(pending_deferred_releases(), 0u);
}

TEST_F(ReleaseThread, ForkWhileOtherThreadsDropLeavesTheChildUsable) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer's allocator can deadlock a child forked mid-allocation";
#endif
#ifdef HDL_THREAD_SANITIZER
  // Seen: the child's new release thread blocked for good on ThreadSanitizer's own allocator
  // lock (DenseSlabAlloc::Refill), held at the fork by a parent thread busy dropping owners.
  GTEST_SKIP() << "ThreadSanitizer cannot start threads in a child forked while others allocate";
#endif
  constexpr int kThreads = 3;
  constexpr int kForks = 40;  // a push holds its lock briefly: many forks to land in one
  std::atomic<bool> stop{false};
  std::array<CountingProducer, kThreads> producers;
  std::array<cudaStream_t, kThreads> streams{};
  for (auto& stream : streams) {
    stream = fake().create_stream(0);
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      while (!stop.load()) {
        drop_pending(fake(), producers[t].make_versioned(), streams[t]);
        fake().complete(streams[t]);
      }
    });
  }
  int hung = 0;
  int failed = 0;
  for (int i = 0; i < kForks; ++i) {
    // Forks land while the other threads are inside a push (or the worker inside a round): the
    // child must find both of the queue's locks free.
    const int status = run_forked(
        [&] {
          flush_deferred_releases();  // the parent's releases are dropped here, not run
          return pending_deferred_releases() == 0 ? child_checks_own_release(fake()) : 1;
        },
        kChildLimit);
    hung += status == -1 ? 1 : 0;
    failed += status > 0 ? 1 : 0;
  }
  stop.store(true);
  for (auto& thread : threads) {
    thread.join();
  }
  flush_deferred_releases();
  EXPECT_EQ(hung, 0);
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(pending_deferred_releases(), 0u);
}

// The library's first deferred release while this thread forks: one round in a fresh process (a
// death test re-executes the binary, so neither the release queue nor the event pools exist yet).
// Every child must find the library usable: the one-time set-up of the queue and of the pools may
// not be left half done, or locked, by a thread that the child does not have. The forks start
// once the other thread has reached `at` (seen through the fake's call counts) and follow each
// other back to back: each fork() holds the fake's lock, so the other thread moves on between two
// of them, into its set-up while the next fork() copies the process.
// Exits with 0, 1 when a child hung, 2 + a child's failed checks otherwise.
[[noreturn]] void fork_during_the_first_release(test::CudaEntry at) {
  constexpr int kChildren = 8;
  FakeCuda& fake = FakeCuda::instance();  // made before the race: the fake is not under test
  fake.reset(1);
  detail::install_cuda_api(&FakeCuda::table());  // no FakeCudaScope: it would make the pools
  cudaStream_t stream = fake.create_stream(0);
  CountingProducer producer;
  std::atomic<bool> running{false};
  std::atomic<bool> go{false};
  std::thread first([&] {
    running.store(true);
    while (!go.load()) {
    }
    drop_pending(fake, producer.make_versioned(), stream);  // the pools' and queue's first use
  });
  while (!running.load()) {
  }
  std::array<pid_t, kChildren> children{};
  go.store(true);
  while (fake.calls(at) == 0) {
  }
  for (pid_t& child : children) {
    child = start_forked([&] {
      flush_deferred_releases();  // hung before: the parent's set-up never ends here
      return child_checks_own_release(fake);
    });
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  int failed = 0;
  for (pid_t child : children) {
    const int status = wait_forked(child, deadline);
    failed = failed != 0 ? failed : status == 0 ? 0 : status == -1 ? 1 : 2 + status;
  }
  first.join();
  std::_Exit(failed);
}

class ReleaseQueueFirstUseDeathTest : public ::testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

TEST_F(ReleaseQueueFirstUseDeathTest, ForkDuringTheFirstReleaseLeavesTheChildUsable) {
#if defined(__SANITIZE_ADDRESS__)
  // g++ 12's AddressSanitizer allocator is not fork-safe: a child forked while another thread
  // allocates can hang on the allocator's own lock, whatever this library does.
  GTEST_SKIP() << "AddressSanitizer's allocator can deadlock a child forked mid-allocation";
#endif
#ifdef HDL_THREAD_SANITIZER
  // As ForkWhileOtherThreadsDropLeavesTheChildUsable: the parent's other thread is allocating at
  // the fork, and ThreadSanitizer's allocator lock can be inherited held (one hang in a run of the
  // whole suite on a loaded machine).
  GTEST_SKIP() << "ThreadSanitizer cannot start threads in a child forked while others allocate";
#endif
  // Where the forks begin: the calls of set_deallocation_stream before the pools' first use, then
  // before the queue's. Before the fix about a third of the rounds hung.
  const std::array<test::CudaEntry, 4> starts = {
      test::CudaEntry::kStreamIsCapturing, test::CudaEntry::kStreamGetDevice,
      test::CudaEntry::kEventCreateWithFlags, test::CudaEntry::kEventRecord};
  constexpr int kRounds = 12;  // each a fresh process
  for (int round = 0; round < kRounds; ++round) {
    EXPECT_EXIT(fork_during_the_first_release(starts[round % starts.size()]),
                ::testing::ExitedWithCode(0), "")
        << "round " << round << ": exit 1 means a forked child hung";
  }
}

// The exit paths end the process: each runs in a child (GoogleTest re-executes the test binary
// for it, so the child starts with one thread).
class ReleaseThreadDeathTest : public test::FakeCudaTest {
 protected:
  void SetUp() override {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    FakeCudaTest::SetUp();
  }
};

// The process's first deferred release makes the release queue (in static storage). Out of host
// memory there, the drop waits for its points here and runs the deleter once, as when the queue has no room for a
// node (ADropWithNoRoomInTheQueueWaitsForItsPointsHere); it used to end the process, the heap's
// std::bad_alloc escaping the noexcept release path.
void first_release_out_of_memory(FakeCuda& fake) {
  cudaStream_t stream = fake.create_stream(0);
  fake.launch(stream);
  int runs = 0;
  auto buffer = std::make_unique<Buffer>(make_callback_tensor([&runs] { ++runs; }));
  if (!buffer->set_deallocation_stream(stream) || detail::ReleaseQueue::existing() != nullptr) {
    std::_Exit(3);  // no point to defer for, or not the first release of the process
  }
  fake.complete(stream);
  {
    test::FailingAllocations failing(0, 1000);
    buffer.reset();
  }
  std::fprintf(stderr, "deleter runs: %d\n", runs);
  std::_Exit(runs == 1 ? 0 : 2);
}

TEST_F(ReleaseThreadDeathTest, FirstReleaseOutOfMemoryWaitsForItsPointsHere) {
  EXPECT_EXIT(first_release_out_of_memory(fake()), ::testing::ExitedWithCode(0), "deleter runs: 1");
}

constexpr int kDeleterStatus = 42;

void exit_from_a_deleter(FakeCuda& fake) {
  cudaStream_t exiting_stream = fake.create_stream(0);
  cudaStream_t other_stream = fake.create_stream(0);
  drop_pending(fake, make_callback_tensor([&fake, other_stream] {
                 fake.complete(other_stream);  // the other release may run from now on
                 std::exit(kDeleterStatus);
               }),
               exiting_stream);
  drop_pending(fake, make_callback_tensor([] { std::fputs("other release ran\n", stderr); }),
               other_stream);
  fake.complete(exiting_stream);
  flush_deferred_releases();  // may return once the exit drain is over: the process is exiting
  std::this_thread::sleep_for(std::chrono::seconds(30));
  std::_Exit(5);  // the deleter never exited
}

TEST_F(ReleaseThreadDeathTest, DeleterThatExitsKeepsItsStatusAndTheOtherReleasesRun) {
  EXPECT_EXIT(exit_from_a_deleter(fake()), ::testing::ExitedWithCode(kDeleterStatus),
              "other release ran");
}

// The drain's limit of 200 ms comes from the environment, or from code when `from_code`.
void exit_while_a_deleter_waits_for_our_lock(FakeCuda& fake, bool from_code) {
  if (from_code) {
    unsetenv("HOLOSCAN_DLPACK_EXIT_DRAIN_MS");
    ReleaseThreadOptions options;
    options.exit_drain = std::chrono::milliseconds(200);
    if (!set_release_thread_options(options)) {
      std::_Exit(5);
    }
  } else {
    setenv("HOLOSCAN_DLPACK_EXIT_DRAIN_MS", "200", 1);
  }
  static std::mutex held_by_exiting_thread;
  static std::atomic<bool> deleter_waits{false};
  held_by_exiting_thread.lock();
  cudaStream_t stream = fake.create_stream(0);
  cudaStream_t never_done = fake.create_stream(0);
  drop_pending(fake, make_callback_tensor([] {
                 deleter_waits.store(true);
                 std::lock_guard<std::mutex> lock(held_by_exiting_thread);
               }),
               stream);
  drop_pending(fake, make_callback_tensor([] { std::_Exit(3); }), never_done);  // must not run
  fake.complete(stream);
  if (!test::eventually([] { return deleter_waits.load(); })) {
    std::_Exit(4);
  }
  std::exit(0);
}

TEST_F(ReleaseThreadDeathTest, ExitDrainGivesUpAfterItsLimit) {
  EXPECT_EXIT(exit_while_a_deleter_waits_for_our_lock(fake(), false), ::testing::ExitedWithCode(0),
              "exit drain: 2 deferred release.s. still pending after 200 ms");
}

TEST_F(ReleaseThreadDeathTest, ExitDrainLimitSetFromCodeApplies) {
  EXPECT_EXIT(exit_while_a_deleter_waits_for_our_lock(fake(), true), ::testing::ExitedWithCode(0),
              "exit drain: 2 deferred release.s. still pending after 200 ms");
}

void exit_while_the_gpu_still_works(FakeCuda& fake, const char* drain_ms);

// An application's drain that waited out the limit for a release the GPU holds back (as Python's
// atexit hook does) leaves the library's drain only what is left of the limit: the exit waits no
// longer than the limit in all, where it waited twice it.
std::chrono::steady_clock::time_point application_drain_began;
constexpr std::chrono::milliseconds kDrainLimit{300};

void exit_after_an_application_drain_used_up_the_limit(FakeCuda& fake) {
  setenv("HOLOSCAN_DLPACK_EXIT_DRAIN_MS", "300", 1);
  if (detail::ReleaseQueue::existing() != nullptr) {
    std::_Exit(6);  // the check below would run before the library's drain, and prove nothing
  }
  // Registered before the library's exit handler (made with the queue, below): runs after it.
  if (std::atexit([] {
        if (std::chrono::steady_clock::now() - application_drain_began >
            kDrainLimit + std::chrono::milliseconds(200)) {
          std::fputs("the library's drain waited the limit again\n", stderr);
          std::_Exit(9);
        }
      }) != 0) {
    std::_Exit(5);
  }
  cudaStream_t never_done = fake.create_stream(0);
  drop_pending(fake, make_callback_tensor([] { std::_Exit(3); }), never_done);  // must not run
  application_drain_began = std::chrono::steady_clock::now();
  if (flush_deferred_releases_for(kDrainLimit)) {
    std::_Exit(4);  // the GPU never passes the point
  }
  detail::ReleaseQueue::application_exit_wait(std::chrono::steady_clock::now() -
                                              application_drain_began);
  std::exit(0);
}

TEST_F(ReleaseThreadDeathTest, AnApplicationsDrainAndTheLibrarysWaitNoLongerThanTheLimitTogether) {
  EXPECT_EXIT(exit_after_an_application_drain_used_up_the_limit(fake()),
              ::testing::ExitedWithCode(0),
              "exit drain: 1 deferred release.s. still pending after 300 ms .HOLOSCAN_DLPACK_"
              "EXIT_DRAIN_MS or ReleaseThreadOptions::exit_drain, 300 ms of them in the "
              "application's own drain.");
}

// An application's drain that found nothing to wait for (Python finalized inside a process that
// goes on, say) leaves the library's drain its whole limit, however long ago it ran: a release
// whose GPU work ends 100 ms into the exit still runs.
void exit_long_after_an_application_drain_that_waited_nothing(FakeCuda& fake) {
  setenv("HOLOSCAN_DLPACK_EXIT_DRAIN_MS", "300", 1);
  const auto began = std::chrono::steady_clock::now();
  if (!flush_deferred_releases_for(kDrainLimit)) {
    std::_Exit(4);  // nothing was pending
  }
  detail::ReleaseQueue::application_exit_wait(std::chrono::steady_clock::now() - began);
  std::this_thread::sleep_for(kDrainLimit + std::chrono::milliseconds(100));  // the process goes on
  exit_while_the_gpu_still_works(fake, "300");
}

TEST_F(ReleaseThreadDeathTest, AnApplicationsDrainThatWaitedNothingLeavesTheLibrarysItsWholeLimit) {
  EXPECT_EXIT(exit_long_after_an_application_drain_that_waited_nothing(fake()),
              ::testing::ExitedWithCode(7), "released during exit");
}

// A release queued after an application's drain that waited out the limit (an embedding program
// that goes on after Py_Finalize, say) was never waited for: the library's drain has its whole
// limit for it, and the release whose GPU work ends 100 ms into the exit runs. It had none left
// and left the release un-run at once.
void exit_with_new_work_after_an_application_drain_used_up_the_limit(FakeCuda& fake) {
  setenv("HOLOSCAN_DLPACK_EXIT_DRAIN_MS", "300", 1);
  cudaStream_t never_done = fake.create_stream(0);
  drop_pending(fake, make_callback_tensor([] { std::_Exit(3); }), never_done);  // must not run
  const auto began = std::chrono::steady_clock::now();
  if (flush_deferred_releases_for(kDrainLimit)) {
    std::_Exit(4);  // the GPU never passes the point
  }
  detail::ReleaseQueue::application_exit_wait(std::chrono::steady_clock::now() - began);
  exit_while_the_gpu_still_works(fake, "300");  // queues the new release, then exits
}

TEST_F(ReleaseThreadDeathTest, AReleaseQueuedAfterAnApplicationsDrainGetsTheWholeLimit) {
  EXPECT_EXIT(exit_with_new_work_after_an_application_drain_used_up_the_limit(fake()),
              ::testing::ExitedWithCode(7), "released during exit");
}

// In static storage, destroyed after the exit drain (registered later, on the library's first
// deferred release): fails the exit (status 9) when a flush_deferred_releases() that was waiting
// when the drain gave up has not returned.
std::atomic<bool> flush_returned{false};
struct FlushWatcher {
  bool armed = false;
  ~FlushWatcher() {
    if (armed && !test::eventually([] { return flush_returned.load(); }, std::chrono::seconds(2))) {
      std::fputs("a flush still waits after the exit drain gave up\n", stderr);
      std::_Exit(9);
    }
  }
};
FlushWatcher flush_watcher;

// A thread waits in flush_deferred_releases() for a release whose deleter waits for a lock the
// exiting thread holds; the drain gives up after 200 ms, and the flush must return then.
void exit_while_a_flush_waits(FakeCuda& fake) {
  setenv("HOLOSCAN_DLPACK_EXIT_DRAIN_MS", "200", 1);
  static std::mutex held_by_exiting_thread;
  static std::atomic<bool> deleter_waits{false};
  held_by_exiting_thread.lock();
  cudaStream_t stream = fake.create_stream(0);
  drop_pending(fake, make_callback_tensor([] {
                 deleter_waits.store(true);
                 std::lock_guard<std::mutex> lock(held_by_exiting_thread);
               }),
               stream);
  fake.complete(stream);
  if (!test::eventually([] { return deleter_waits.load(); })) {
    std::_Exit(4);
  }
  flush_watcher.armed = true;
  std::thread([] {
    flush_deferred_releases();
    flush_returned.store(true);
  }).detach();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the flush is waiting by now
  std::exit(0);
}

TEST_F(ReleaseThreadDeathTest, AFlushWaitingWhenTheExitDrainGivesUpReturns) {
  EXPECT_EXIT(exit_while_a_flush_waits(fake()), ::testing::ExitedWithCode(0),
              "exit drain: 1 deferred release.s. still pending after 200 ms");
}

// `drain_ms`: the value of HOLOSCAN_DLPACK_EXIT_DRAIN_MS, null to leave it unset.
void exit_while_the_gpu_still_works(FakeCuda& fake, const char* drain_ms) {
  if (drain_ms != nullptr) {
    setenv("HOLOSCAN_DLPACK_EXIT_DRAIN_MS", drain_ms, 1);
  } else {
    unsetenv("HOLOSCAN_DLPACK_EXIT_DRAIN_MS");
  }
  cudaStream_t stream = fake.create_stream(0);
  drop_pending(fake, make_callback_tensor([] { std::fputs("released during exit\n", stderr); }),
               stream);
  static std::atomic<bool> exiting{false};
  // The "GPU" finishes only once exit has begun, so the release runs from the exit drain.
  std::thread([&fake, stream] {
    while (!exiting.load()) {
      std::this_thread::yield();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    fake.complete(stream);
  }).detach();
  exiting.store(true);
  std::exit(7);
}

TEST_F(ReleaseThreadDeathTest, ExitDrainWaitsForTheGpuWithinItsLimit) {
  EXPECT_EXIT(exit_while_the_gpu_still_works(fake(), nullptr), ::testing::ExitedWithCode(7),
              "released during exit");
}

// An owner in static storage, destroyed among the static destructors: after the exit drain,
// which is registered later (on the library's first deferred release). Its destructor fails the
// exit (status 9) if dropping the owner held the exiting thread past the drain's limit.
struct LateOwner {
  std::unique_ptr<Buffer> buffer;
  std::chrono::milliseconds limit{};
  ~LateOwner() {
    if (buffer == nullptr) {
      return;
    }
    const auto start = std::chrono::steady_clock::now();
    buffer.reset();
    if (std::chrono::steady_clock::now() - start > limit) {
      std::fputs("the late release held the exit past the drain's limit\n", stderr);
      std::_Exit(9);
    }
  }
};
LateOwner late_owner;

// Exits with an owner left in static storage whose stream finishes `gpu_done` after exit begins;
// the drain's limit is 300 ms. Its deleter prints "late release ran", or fails the exit (status 8)
// when `must_not_run`.
void exit_with_a_late_owner(FakeCuda& fake, std::chrono::milliseconds gpu_done, bool must_not_run) {
  setenv("HOLOSCAN_DLPACK_EXIT_DRAIN_MS", "300", 1);
  cudaStream_t stream = fake.create_stream(0);
  drop_pending(fake, make_callback_tensor([] {}), stream);  // the queue and its exit handler
  fake.complete(stream);
  flush_deferred_releases();
  late_owner.limit = std::chrono::milliseconds(300 + 200);  // the drain's limit, and a margin
  late_owner.buffer = std::make_unique<Buffer>(make_callback_tensor([must_not_run] {
    std::fputs("late release ran\n", stderr);
    if (must_not_run) {
      std::_Exit(8);
    }
  }));
  fake.launch(stream);
  if (!late_owner.buffer->set_deallocation_stream(stream)) {
    std::_Exit(5);
  }
  std::thread([&fake, stream, gpu_done] {
    std::this_thread::sleep_for(gpu_done);
    fake.complete(stream);
  }).detach();
  std::exit(0);
}

TEST_F(ReleaseThreadDeathTest, ReleaseAfterTheExitDrainWaitsNoLongerThanItsLimit) {
  // Before the fix the exiting thread waited on the host for the GPU (here 3 s), then released.
  EXPECT_EXIT(exit_with_a_late_owner(fake(), std::chrono::seconds(3), true),
              ::testing::ExitedWithCode(0),
              "release deferred after the exit drain was still pending at its limit");
}

TEST_F(ReleaseThreadDeathTest, ReleaseAfterTheExitDrainRunsIfTheGpuFinishesInTime) {
  EXPECT_EXIT(exit_with_a_late_owner(fake(), std::chrono::milliseconds(20), false),
              ::testing::ExitedWithCode(0), "late release ran");
}

// Registered before the release queue's own exit handler, so it runs after the drain: it gives
// the worker, which the drain left behind, time to leave its loop before the process ends.
void let_the_abandoned_worker_finish() {
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  std::fputs("the worker had time to finish\n", stderr);
}

// The drain gives up on a release whose point never completes; the worker then ends.
void exit_with_the_drain_giving_up(FakeCuda& fake) {
  setenv("HOLOSCAN_DLPACK_EXIT_DRAIN_MS", "100", 1);
  if (detail::ReleaseQueue::existing() != nullptr ||
      std::atexit(let_the_abandoned_worker_finish) != 0) {
    std::_Exit(3);
  }
  cudaStream_t never_done = fake.create_stream(0);
  drop_pending(fake, make_callback_tensor([] { std::_Exit(4); }), never_done);  // must not run
  std::exit(0);
}

// The worker that an exit drain gave up on is detached, not left a finished thread that nobody
// joined: ThreadSanitizer reported that as a thread leak and ended the process with status 66.
// (Only a ThreadSanitizer build can tell; the others check the drain's give-up and the status.)
TEST_F(ReleaseThreadDeathTest, AWorkerTheExitDrainGaveUpOnIsNotLeftUnjoined) {
  EXPECT_EXIT(exit_with_the_drain_giving_up(fake()), ::testing::ExitedWithCode(0),
              "exit drain: 1 deferred release.s. still pending after 100 ms(.|\n)*the worker had "
              "time to finish");
}

TEST_F(ReleaseThreadDeathTest, HugeExitDrainLimitIsClampedNotOverflowed) {
  // Before the fix 10^13 ms overflowed the deadline: the drain gave up at once, un-run.
  EXPECT_EXIT(exit_while_the_gpu_still_works(fake(), "10000000000000"),
              ::testing::ExitedWithCode(7),
              "EXIT_DRAIN_MS=\"10000000000000\" is above the maximum; 86400000 ms applies"
              "(.|\n)*released during exit");
}

}  // namespace
}  // namespace holoscan
