// Connections made while one side is out of host memory (each allocation of its calls made to
// fail in turn, support/allocation_hooks): a connection either comes about whole, or ends at once
// on both sides. No connection request is lost (its client would wait for an answer until its
// timeout), and no endpoint is left without the Peer that would close it.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <new>
#include <string>
#include <thread>

#include "holoscan/tensor_pool.hpp"
#include "support/allocation_hooks.hpp"
#include "ucx/ucx_test_support.hpp"

namespace holoscan::test {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kConnectMs = 4000;  // an answer that never comes: connect() waits this long

// A listening worker whose accept() runs on a thread of its own until the object goes.
class Serving {
 public:
  Serving() : port_(static_cast<std::uint16_t>(std::stoi(listen_on_loopback(worker)))) {
    thread_ = std::thread([this] {
      while (!stop_.load()) {
        if (auto id = worker.accept(5)) {
          accepted.store(*id);
        }
      }
    });
  }
  ~Serving() {
    stop_.store(true);
    thread_.join();
  }
  Serving(const Serving&) = delete;
  Serving& operator=(const Serving&) = delete;
  std::uint16_t port() const noexcept { return port_; }

  ucx::Worker worker = make_worker();    ///< The listener.
  std::atomic<ucx::PeerId> accepted{0};  ///< The connection accept() returned (0: none yet).

 private:
  std::uint16_t port_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Progresses `worker` until `done` says so or `limit` passed.
template <class Done>
void progress_until(ucx::Worker& worker, Clock::duration limit, Done done) {
  const auto until = Clock::now() + limit;
  while (!done() && Clock::now() < until) {
    (void)worker.progress();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// One attempt: a client connects on another thread while the listener's allocations after the
// first `skip` fail; whether an allocation failed.
bool accept_with_failing_allocation(std::uint64_t skip) {
  ucx::Worker listener = make_worker();
  const auto port = static_cast<std::uint16_t>(std::stoi(listen_on_loopback(listener)));
  ucx::Worker client = make_worker();
  expected<ucx::PeerId, Error> connected = make_unexpected(ErrorCode::kFailure, "not yet");
  std::atomic<bool> returned{false};
  std::thread connecting([&] {
    connected = client.connect("127.0.0.1", port, kConnectMs);
    returned.store(true);
  });
  ucx::PeerId accepted = 0;
  bool escaped = false;  // an exception out of accept(), which promises none
  std::uint64_t failed = 0;
  {
    FailingAllocations failing(skip);
    while (!returned.load()) {
      try {
        if (auto id = listener.accept(5)) {
          accepted = *id;
        }
      } catch (const std::bad_alloc&) {
        escaped = true;
      }
    }
    failed = failing.failed();
  }
  connecting.join();
  SCOPED_TRACE("allocation " + std::to_string(skip));
  EXPECT_FALSE(escaped) << "std::bad_alloc escaped accept()";
  if (!connected) {
    EXPECT_NE(connected.error().code, ErrorCode::kTimeout)
        << "the listener lost the connection request: " << to_string(connected.error());
    return failed != 0;
  }
  // Connected: the listener has the connection whole (accept() gives it, once).
  if (accepted == 0) {
    accepted = listener.accept(3000).value_or(0);
  }
  EXPECT_NE(accepted, 0u) << "a connection the client has was never accepted";
  EXPECT_TRUE(listener.connected(accepted));
  return failed != 0;
}

TEST(UcxConnectOutOfMemory, NoConnectionRequestIsLostWhateverAllocationFails) {
  for_each_failing_allocation(accept_with_failing_allocation);
}

// One attempt: a connect() whose allocations after the first `skip` fail; whether one failed.
bool connect_with_failing_allocation(std::uint64_t skip) {
  Serving serving;
  ucx::Worker client = make_worker();
  expected<ucx::PeerId, Error> connected = make_unexpected(ErrorCode::kFailure, "not yet");
  std::uint64_t failed = 0;
  const auto start = Clock::now();
  {
    FailingAllocations failing(skip);
    connected = client.connect("127.0.0.1", serving.port(), kConnectMs);
    failed = failing.failed();
  }
  const auto took = Clock::now() - start;
  SCOPED_TRACE("allocation " + std::to_string(skip));
  if (connected) {
    progress_until(client, std::chrono::seconds(3), [&] { return serving.accepted.load() != 0; });
    EXPECT_NE(serving.accepted.load(), 0u);
    EXPECT_TRUE(client.connected(*connected));
    return failed != 0;
  }
  EXPECT_LT(std::chrono::duration_cast<std::chrono::milliseconds>(took).count(), kConnectMs / 2)
      << "ms for a connect() out of memory: " << to_string(connected.error());
  // The connection the listener may have accepted ends: nothing of it is left on the client.
  progress_until(client, std::chrono::milliseconds(300),
                 [&] { return serving.accepted.load() != 0; });
  progress_until(client, std::chrono::seconds(3), [&] {
    const ucx::PeerId id = serving.accepted.load();
    return id == 0 || !serving.worker.connected(id);
  });
  const ucx::PeerId id = serving.accepted.load();
  EXPECT_TRUE(id == 0 || !serving.worker.connected(id))
      << "the client's connect() failed (" << to_string(connected.error())
      << "), its connection stayed up";
  return failed != 0;
}

TEST(UcxConnectOutOfMemory, AConnectThatFailsLeavesNoConnectionBehind) {
  for_each_failing_allocation(connect_with_failing_allocation);
}

// A connect() whose own clean-up runs out of host memory (after its wait timed out, the first
// allocation of ending its connection fails) marks its peer abandoned: connect() still reports
// the failure, the next round ends the connection, the tensor the listener sent meanwhile is
// dropped unconfirmed and never reported, the peer is forgotten, and the worker connects again.
TEST(UcxConnectOutOfMemory, AConnectAbandonedOutOfMemoryDropsItsTensorAndIsForgotten) {
  constexpr int kWaitMs = 1000;   // ample for the listener's tensor to land meanwhile
  constexpr int kUnanswered = 9;  // the early listener's exit status: tensor 1 never confirmed
  constexpr int kListenerGoneMs = 4000;  // under its linger: it exits because the connection ended
  Serving serving;
  // The allocations connect() makes before it waits (a wait makes none of its own): the first one
  // to fail after them and after the deadline is the first of the clean-up.
  std::uint64_t before_wait = 0;
  {
    ucx::Worker client = make_worker();
    NewCounter counter;
    auto peer = client.connect("127.0.0.1", serving.port(), kConnectMs);
    before_wait = counter.calls();
    ASSERT_TRUE(peer) << to_string(peer.error());
  }
  for (std::uint64_t skip = before_wait; skip < before_wait + 60; ++skip) {
    auto listener = start_early_listener({"linger=8000"});  // never answers the Hello
    ASSERT_NE(listener.port, 0);
    ucx::Worker worker = make_worker();
    expected<ucx::PeerId, Error> connected = make_unexpected(ErrorCode::kFailure, "not yet");
    std::uint64_t failed = 0;
    const auto start = Clock::now();
    {
      FailingAllocations failing(skip);
      connected = worker.connect("127.0.0.1", listener.port, kWaitMs);
      failed = failing.failed();
    }
    const bool after_wait = Clock::now() - start >= std::chrono::milliseconds(kWaitMs);
    SCOPED_TRACE("allocation " + std::to_string(skip));
    if (failed == 0) {
      ADD_FAILURE() << "past the allocations of connect(), none of its clean-up failed: "
                    << (connected ? "connected" : to_string(connected.error()));
      (void)wait_peer(listener.pid, kListenerGoneMs, &worker);
      return;
    }
    if (connected || !after_wait || connected.error().code != ErrorCode::kResourceExhausted) {
      // A failure in the wait (a round that took the tensor in): not the path of this test.
      if (connected) {
        (void)worker.disconnect(*connected);
      }
      EXPECT_EQ(wait_peer(listener.pid, kListenerGoneMs, &worker), kUnanswered);
      continue;
    }
    EXPECT_NE(connected.error().message.find("out of host memory"), std::string::npos)
        << to_string(connected.error());
    // The worker's first id (1), never given: no connection, before a round has ended it too.
    EXPECT_FALSE(worker.connected(1));
    // Nothing of it is reported, while the rounds of receive() end its connection.
    std::string reported;
    const auto until = Clock::now() + std::chrono::milliseconds(1500);
    while (Clock::now() < until) {
      auto received = worker.receive(20);
      if (!received) {
        reported += to_string(received.error()) + "; ";
      } else if (*received) {
        reported += "tensor " + std::to_string((*received)->sequence) + " of peer " +
                    std::to_string((*received)->peer) + "; ";
      }
    }
    EXPECT_EQ(reported, "") << "of a connection whose connect() failed";
    // Ended by the round after connect() (counted lost there), not by connect() itself: the
    // abandoned path, not a timeout's clean-up that failed only after it had ended the connection.
    EXPECT_EQ(worker.stats().peers_lost, 1u) << "not the abandoned path";
    EXPECT_EQ(worker.stats().received, 0u);
    EXPECT_EQ(wait_peer(listener.pid, kListenerGoneMs, &worker), kUnanswered)
        << "the connection stayed up, or the listener's tensor was confirmed";
    // The worker connects again; the abandoned peer's id (the one before) is forgotten: a send to
    // it is answered as to an id let go of, not as to a peer still kept.
    auto again = worker.connect("127.0.0.1", serving.port(), kConnectMs);
    ASSERT_TRUE(again) << to_string(again.error());
    EXPECT_TRUE(worker.connected(*again));
    const ucx::PeerId abandoned = *again - 1;
    EXPECT_FALSE(worker.connected(abandoned));
    EXPECT_EQ(worker.in_flight(abandoned), 0u);
    auto pool = TensorPool::create({PoolMemory::kHost, 0, 64, 1});
    ASSERT_TRUE(pool);
    auto late = worker.send(abandoned, (*pool)->allocate({4}, DLDataType{kDLFloat, 32, 1}).value());
    ASSERT_FALSE(late);
    EXPECT_EQ(late.error().code, ErrorCode::kClosed) << to_string(late.error());
    EXPECT_NE(late.error().message.find("is gone (closed)"), std::string::npos)
        << to_string(late.error()) << ": the abandoned peer is still kept";
    return;
  }
  ADD_FAILURE() << "no allocation of the clean-up failed within 60 of them";
}

}  // namespace
}  // namespace holoscan::test
