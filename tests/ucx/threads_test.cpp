// One worker used from two threads: a receive() asleep on the worker's fd must wake when another
// thread's progress() lands the tensor it waits for, not sleep on to its deadline (UCX's fd tells
// only the thread that progresses first).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "ucx/series.hpp"
#include "ucx/ucx_test_support.hpp"

namespace holoscan::test {
namespace {

TEST(UcxThreads, AReceiverAsleepWakesWhenAnotherThreadProgressLandsItsTensor) {
  constexpr std::uint64_t kCount = 12;
  // Each receive would sleep this long if another thread's round left it asleep: the whole
  // series must take far less than one such wait.
  constexpr int kDeadlineMs = 30000;
  // window=1: the sender waits for each Ack, so every receive finds nothing and goes to sleep.
  auto [pool, worker, peer] = connect_sender(0, {"count=12", "window=1"});
  std::atomic<bool> done{false};
  std::thread progressing([&, &worker = worker] {
    while (!done.load()) {
      (void)worker.progress();
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  });
  const auto start = std::chrono::steady_clock::now();
  for (std::uint64_t k = 0; k < kCount; ++k) {
    auto received = worker.receive(kDeadlineMs);
    ASSERT_TRUE(received) << to_string(received.error());
    ASSERT_TRUE(received->has_value()) << "tensor " << k << " did not come";
    EXPECT_EQ(ucx_series::check(k, (*received)->tensor), "");
  }
  const auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(wait_peer(peer, kDeadlineMs, &worker), 0) << "the sender saw a send fail";
  done.store(true);
  progressing.join();
  EXPECT_LT(std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count(), kDeadlineMs / 2)
      << "ms for the series: a receive slept on after another thread landed its tensor";
}

}  // namespace
}  // namespace holoscan::test
