// Covers the release thread's poll interval: it rests as long as asked between rounds, however
// long that is, and a flush never waits that long once the GPU is done.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

#include "holoscan/deferred_release.hpp"
#include "holoscan/dlpack.hpp"
#include "support/counting_producer.hpp"
#include "support/fake_cuda_test.hpp"

namespace holoscan {
namespace {

using std::chrono::milliseconds;
using test::CountingProducer;
using test::CudaEntry;

// Each test sets a poll interval from code and leaves the defaults behind it.
class ReleasePolling : public test::FakeCudaTest {
 protected:
  void SetUp() override {
    FakeCudaTest::SetUp();
    unsetenv("HOLOSCAN_DLPACK_RELEASE_POLL_US");
  }
  void TearDown() override { ASSERT_TRUE(set_release_thread_options({})); }

  static void set_poll_interval(std::chrono::microseconds interval) {
    ReleaseThreadOptions options;
    options.poll_interval = interval;
    ASSERT_TRUE(set_release_thread_options(options));
  }
};

TEST_F(ReleasePolling, IntervalAboveAMillisecondIsHonouredWhileWaiting) {
  set_poll_interval(milliseconds(200));
  CountingProducer producer;
  cudaStream_t stream = fake().create_stream(0);
  const auto before = fake().calls(CudaEntry::kEventQuery);
  test::drop_pending(fake(), producer.make_versioned(), stream);
  ASSERT_TRUE(wait_for_calls(CudaEntry::kEventQuery, before, 1));  // the thread has seen it

  // A round asks at most two questions here (the fan-in's mark, then the point itself). Before
  // the fix the thread backed off to 1 ms whatever the setting: about 600 rounds in this time.
  const auto start = fake().calls(CudaEntry::kEventQuery);
  const auto started = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(milliseconds(600));
  const auto asked = fake().calls(CudaEntry::kEventQuery) - start;
  // Counted over the time that really passed: a loaded machine may oversleep the 600 ms.
  const auto slept =
      std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - started).count();
  EXPECT_LE(asked, 2u * (static_cast<std::size_t>(slept) / 200 + 2));
  EXPECT_EQ(producer.deleter_calls(), 0);

  fake().complete(stream);
  flush_deferred_releases();
  EXPECT_EQ(producer.deleter_calls(), 1);
}

// The bounded flush (shutdown paths): it gives up at its limit while the GPU is busy, leaving the
// release pending, and returns true once the release ran.
TEST_F(ReleasePolling, ABoundedFlushGivesUpAtItsLimitAndSaysWhetherEverythingRan) {
  CountingProducer producer;
  cudaStream_t stream = fake().create_stream(0);
  test::drop_pending(fake(), producer.make_versioned(), stream);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(flush_deferred_releases_for(milliseconds(100))) << "the GPU is still busy";
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(100));
  EXPECT_EQ(producer.deleter_calls(), 0);
  EXPECT_EQ(pending_deferred_releases(), 1u) << "a flush that gave up leaves the release queued";

  fake().complete(stream);
  EXPECT_TRUE(flush_deferred_releases_for(std::chrono::seconds(10)));
  EXPECT_EQ(producer.deleter_calls(), 1);
  EXPECT_TRUE(flush_deferred_releases_for(milliseconds(0))) << "nothing left to wait for";
  EXPECT_TRUE(flush_deferred_releases_for(milliseconds::max())) << "a limit past any clock";
}

TEST_F(ReleasePolling, FlushDoesNotWaitAPollIntervalOnceTheGpuIsDone) {
  set_poll_interval(std::chrono::seconds(1));
  CountingProducer producer;
  cudaStream_t stream = fake().create_stream(0);
  test::drop_pending(fake(), producer.make_versioned(), stream);

  const auto before_flush = fake().calls(CudaEntry::kEventQuery);
  auto flushed = std::async(std::launch::async, [] { flush_deferred_releases(); });
  // The flush woke the thread, which found the GPU busy: before the fix it then rested the whole
  // interval (1 s) before asking again.
  ASSERT_TRUE(wait_for_calls(CudaEntry::kEventQuery, before_flush, 1));
  const auto done = std::chrono::steady_clock::now();
  fake().complete(stream);
  ASSERT_EQ(flushed.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  const auto waited_ms =
      std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - done).count();
  EXPECT_LT(waited_ms, 600);  // the rest it took before: 1000 ms
  EXPECT_EQ(producer.deleter_calls(), 1);
}

}  // namespace
}  // namespace holoscan
