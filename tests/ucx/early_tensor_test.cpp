// A listener may send a tensor to a new connection before its answer to the connecting worker's
// Hello arrives: that tensor reaches the worker while its connect() still waits. receive() must
// not hand it out before connect() gave the caller its peer id (another thread's receive() would
// name a peer the caller has never heard of), nor at all when connect() fails (the caller was
// told the connection does not exist, and the sender must not learn "delivered").
#include <poll.h>
#include <sys/wait.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "support/allocation_hooks.hpp"
#include "ucx/ucx_test_support.hpp"

namespace holoscan::test {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr int kPatienceMs = 20000;
constexpr int kDelivered = 0;   // the peer's exit status: tensor 1 was confirmed
constexpr int kUnanswered = 9;  // tensor 1 was never confirmed

// What one receive() on another thread got, and when it returned.
struct ReceiveOnAThread {
  ReceiveOnAThread(ucx::Worker& worker, int timeout_ms)
      : thread([this, &worker, timeout_ms] {
          auto got = worker.receive(timeout_ms);
          returned = Clock::now();
          if (!got) {
            error = to_string(got.error());
          } else if (*got) {
            peer = (*got)->peer;
          }
        }) {}
  std::optional<ucx::PeerId> peer;  // the peer of the tensor handed out
  std::string error;
  Clock::time_point returned;
  std::thread thread;  // last: the members it writes exist before it starts
};

// The listener answers the Hello 1.5 s after it came; the tensor it sent first waits in the
// connecting worker until connect() returned, then wakes the receive() asleep beside it.
TEST(UcxThreads, ATensorFromAPeerStillConnectingWaitsUntilConnectReturnsItsId) {
  constexpr int kHelloAfterMs = 1500;
  auto listener = start_early_listener({"hello_after=" + std::to_string(kHelloAfterMs)});
  ASSERT_NE(listener.port, 0);
  Clock::time_point connected;
  {
    ucx::Worker worker = make_worker();
    const auto start = Clock::now();
    ReceiveOnAThread receive(worker, kPatienceMs);
    auto peer = worker.connect("127.0.0.1", listener.port, kPatienceMs);
    connected = Clock::now();
    receive.thread.join();
    ASSERT_TRUE(peer) << to_string(peer.error());
    ASSERT_TRUE(receive.peer) << "no tensor came: " << receive.error;
    EXPECT_EQ(*receive.peer, *peer);
    // Before connect() returned, the caller had no id to match the tensor with.
    const auto handed_out = std::chrono::duration_cast<milliseconds>(receive.returned - start);
    EXPECT_GE(handed_out.count(), kHelloAfterMs - 500)
        << "ms: the tensor was handed out before the listener answered the Hello";
    // connect() giving the id makes the tensor due: the receive() asleep beside it is woken.
    EXPECT_LT(std::chrono::duration_cast<milliseconds>(receive.returned - connected).count(), 2000)
        << "ms from connect() to the tensor";
  }  // the worker's orderly close sends the confirmation
  EXPECT_EQ(wait_peer(listener.pid, kPatienceMs), kDelivered);
}

// The same with an event loop of the caller's own on another thread (receive(0), sleep on fd()
// when arm() says so, progress()): the round that brought the listener's answer may be the
// loop's, which then sleeps, and connect() returning the id is what makes the tensor due: it
// makes fd() readable for the loop.
TEST(UcxUnanswered, ATensorHeldForItsConnectWakesAnEventLoopOnceConnectReturns) {
  constexpr int kHelloAfterMs = 500;
  constexpr int kLoopSleepMs = 4000;
  for (int round = 0; round < 3; ++round) {
    auto listener = start_early_listener({"hello_after=" + std::to_string(kHelloAfterMs)});
    ASSERT_NE(listener.port, 0);
    {
      ucx::Worker worker = make_worker();
      const auto start = Clock::now();
      std::optional<ucx::PeerId> got;
      Clock::time_point handed_out;
      std::thread loop([&] {
        const auto until = Clock::now() + milliseconds(kPatienceMs);
        while (!got && Clock::now() < until) {
          if (auto received = worker.receive(0); received && *received) {
            got = (*received)->peer;
            handed_out = Clock::now();
            break;
          }
          if (worker.arm()) {
            pollfd entry{worker.fd(), POLLIN, 0};
            (void)::poll(&entry, 1, kLoopSleepMs);
          }
          (void)worker.progress();
        }
      });
      auto peer = worker.connect("127.0.0.1", listener.port, kPatienceMs);
      const auto connected = Clock::now();
      loop.join();
      ASSERT_TRUE(peer) << to_string(peer.error());
      ASSERT_TRUE(got) << "no tensor came";
      EXPECT_EQ(*got, *peer);
      EXPECT_GE(std::chrono::duration_cast<milliseconds>(handed_out - start).count(),
                kHelloAfterMs - 100)
          << "ms: the tensor was handed out before the listener answered the Hello";
      EXPECT_LT(std::chrono::duration_cast<milliseconds>(handed_out - connected).count(), 2000)
          << "ms from connect() to the tensor (round " << round << ")";
    }
    EXPECT_EQ(wait_peer(listener.pid, kPatienceMs), kDelivered);
  }
}

// The listener never answers: connect() times out, and the tensor it sent is neither handed out
// (on another thread, while connect() waited, or after) nor confirmed to its sender.
TEST(UcxFailure, ATensorFromAPeerWhoseConnectTimedOutIsNeverHandedOut) {
  constexpr int kConnectMs = 1500;
  auto listener = start_early_listener({});
  ASSERT_NE(listener.port, 0);
  {
    ucx::Worker worker = make_worker();
    ReceiveOnAThread receive(worker, kConnectMs + 1500);
    auto peer = worker.connect("127.0.0.1", listener.port, kConnectMs);
    receive.thread.join();
    ASSERT_FALSE(peer);
    EXPECT_EQ(peer.error().code, ErrorCode::kTimeout) << to_string(peer.error());
    EXPECT_FALSE(receive.peer) << "a tensor of peer " << *receive.peer
                               << ", whose connect() failed, was handed out";
    EXPECT_EQ(receive.error, "");
    auto after = worker.receive(200);
    EXPECT_TRUE(after && !*after) << (after ? "a tensor of peer " + std::to_string((*after)->peer)
                                            : to_string(after.error()));
  }
  EXPECT_EQ(wait_peer(listener.pid, kPatienceMs), kUnanswered);
}

// One thread: the listener sends its tensor, then goes without answering. connect() reports the
// loss; the tensor that landed before it is not handed out afterwards as if the peer existed.
TEST(UcxFailure, ATensorFromAListenerLostBeforeItAnsweredIsNeverHandedOut) {
  auto listener = start_early_listener({"linger=500"});
  ASSERT_NE(listener.port, 0);
  ucx::Worker worker = make_worker();
  auto peer = worker.connect("127.0.0.1", listener.port, 8000);
  ASSERT_FALSE(peer);
  EXPECT_TRUE(peer.error().code == ErrorCode::kClosed || peer.error().code == ErrorCode::kTimeout)
      << to_string(peer.error());
  auto after = worker.receive(200);
  EXPECT_TRUE(after && !*after) << (after ? "a tensor of peer " + std::to_string((*after)->peer) +
                                                ", whose connect() failed"
                                          : to_string(after.error()));
  EXPECT_EQ(wait_peer(listener.pid, kPatienceMs), kUnanswered);
}

// Out of host memory in a round of connect()'s wait (here the landing of the tensor the listener
// sent first: its memory, then its refusal's message), connect() fails: the connection it made
// must end too, or it stays up with neither side knowing it (the caller has no id; the listener's
// tensor is held for a connect() that never returns, unconfirmed, its send never ended).
TEST(UcxFailure, AConnectWhoseWaitRunsOutOfMemoryLeavesNoConnectionBehind) {
  // The allocations connect() makes before it waits (a wait makes none of its own): the sweep
  // fails those after them, in the rounds that take the listener's tensor in.
  std::uint64_t before_wait = 0;
  {
    ucx::Worker listener = make_worker();
    ucx::Worker client = make_worker();
    const auto port = static_cast<std::uint16_t>(std::stoi(listen_on_loopback(listener)));
    std::atomic<bool> done{false};
    std::thread answering([&] {
      while (!done.load()) {
        (void)listener.progress();  // answers the Hello
      }
    });
    NewCounter counter;
    auto peer = client.connect("127.0.0.1", port, kPatienceMs);
    before_wait = counter.calls();
    done.store(true);
    answering.join();
    ASSERT_TRUE(peer) << to_string(peer.error());
  }
  std::uint64_t failures = 0;
  for (std::uint64_t skip = before_wait; skip < before_wait + 60; ++skip) {
    auto listener = start_early_listener({"hello_after=300", "linger=4000"});
    ASSERT_NE(listener.port, 0);
    ucx::Worker worker = make_worker();
    expected<ucx::PeerId, Error> peer = make_unexpected(ErrorCode::kFailure, "not yet");
    std::uint64_t failed = 0;
    {
      FailingAllocations failing(skip, 2);
      peer = worker.connect("127.0.0.1", listener.port, 3000);
      failed = failing.failed();
    }
    SCOPED_TRACE("allocation " + std::to_string(skip));
    if (peer) {
      (void)worker.disconnect(*peer);
    }
    // The connection ends (the listener sees it go and exits) while the worker progresses.
    int status = 0;
    bool exited = false;
    const auto until = Clock::now() + milliseconds(2500);
    while (!exited && Clock::now() < until) {
      (void)worker.progress();
      exited = ::waitpid(listener.pid, &status, WNOHANG) == listener.pid;
      std::this_thread::sleep_for(milliseconds(5));
    }
    EXPECT_TRUE(exited) << "connect() said " << (peer ? "ok" : to_string(peer.error()))
                        << ", the connection stayed up";
    if (!exited) {
      (void)wait_peer(listener.pid, kPatienceMs);
    }
    failures += failed;
    if (failed == 0) {
      break;  // past the last allocation of the wait
    }
  }
  EXPECT_GT(failures, 0u) << "no allocation of the wait failed: the test saw nothing";
}

}  // namespace
}  // namespace holoscan::test
