// Connections driven by hand in one process, where the order of the two workers' rounds decides
// the outcome: a confirmation queued when arm() says the worker may sleep, a landing that fails
// while the connection stays up, and a disconnect of a peer already lost. Each would leave a send
// unanswered or an arrival reported that must not be.
#include <poll.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "support/allocation_hooks.hpp"
#include "support/fake_cuda.hpp"
#include "support/thread_asleep.hpp"
#include "ucx/failing_am_send.hpp"
#include "ucx/failing_landing.hpp"
#include "ucx/series.hpp"
#include "ucx/ucx_test_support.hpp"

namespace holoscan::test {
namespace {

using Clock = std::chrono::steady_clock;

// A small host tensor of the series (tensor 0: eager over tcp).
Tensor small_tensor(const std::shared_ptr<TensorPool>& pool) {
  auto tensor = ucx_series::pooled(*pool, 0);
  EXPECT_TRUE(tensor);
  return std::move(*tensor);
}

std::shared_ptr<TensorPool> host_pool(std::size_t blocks) {
  auto pool = TensorPool::create({PoolMemory::kHost, 0, ucx_series::kMaxBytes, blocks});
  EXPECT_TRUE(pool);
  return *pool;
}

// Sends a tensor of `bytes` bytes from `pool` (what UCX moves by rendezvous from a few MiB on).
::testing::AssertionResult send_bytes(ucx::Worker& client, ucx::PeerId peer, TensorPool& pool,
                                      std::size_t bytes) {
  auto tensor = pool.allocate({static_cast<std::int64_t>(bytes)}, DLDataType{kDLUInt, 8, 1});
  if (!tensor) {
    return ::testing::AssertionFailure() << "allocate: " << to_string(tensor.error());
  }
  if (auto sent = client.send(peer, *tensor); !sent) {
    return ::testing::AssertionFailure() << "send: " << to_string(sent.error());
  }
  return ::testing::AssertionSuccess();
}

// A worker's configuration with `window` tensors in flight per peer.
ucx::WorkerConfig with_window(std::size_t window) {
  ucx::WorkerConfig config;
  config.window = window;
  return config;
}

// A client with a window of one tensor, connected to a receiver in this process, and its pool.
struct WindowOfOne {
  ucx::Worker receiver = make_worker();
  ucx::Worker client = make_worker(with_window(1));
  InProcessLink link = connect_in_process(receiver, client);
  std::shared_ptr<TensorPool> pool = host_pool(2);
};

// The client sends one small tensor, and both sides progress until it has landed; nobody takes it.
void land_untaken(WindowOfOne& sides) {
  ASSERT_TRUE(sides.client.send(*sides.link.client, small_tensor(sides.pool)));
  for (int i = 0; i < 300; ++i) {
    (void)sides.client.progress();
    (void)sides.receiver.progress();
  }
}

// Progresses `worker` until arm() says it may sleep (it answers busy once after activity); false
// when it never did within 5 s.
bool arm_once_quiet(ucx::Worker& worker) {
  for (const auto quiet_by = Clock::now() + std::chrono::seconds(5); Clock::now() < quiet_by;) {
    if (worker.arm()) {
      return true;
    }
    (void)worker.progress();
  }
  return false;
}

// What `worker` reports within `ms` (a tensor, or an error's text).
std::vector<std::string> reports_within(ucx::Worker& worker, int ms) {
  std::vector<std::string> reported;
  const auto until = Clock::now() + std::chrono::milliseconds(ms);
  while (Clock::now() < until) {
    auto received = worker.receive(10);
    if (!received) {
      reported.push_back(to_string(received.error()));
    } else if (*received) {
      reported.push_back("tensor " + std::to_string((*received)->sequence));
    }
  }
  return reported;
}

// receive() hands out a tensor that landed in an earlier round without a round of its own, so its
// confirmation is only queued. arm() must then say "progress first": an application that sleeps
// on fd() when arm() is true never sends the confirmation, and a sender with a full window waits
// for it forever (nothing else will make fd() readable).
TEST(UcxUnanswered, ArmIsFalseWhileAConfirmationWaitsToGoOut) {
  WindowOfOne sides;
  auto& [receiver, client, link, pool] = sides;
  ASSERT_TRUE(link.client) << to_string(link.client.error());
  land_untaken(sides);
  (void)arm_once_quiet(receiver);
  auto received = receiver.receive(0);  // landed already: handed out without a round
  ASSERT_TRUE(received && *received) << "nothing arrived";
  // An event loop: sleep on fd() when arm() says so, progress when it is readable.
  const bool armed = receiver.arm();
  std::optional<ucx::SendResult> result;
  const auto until = Clock::now() + std::chrono::seconds(2);
  while (!result && Clock::now() < until) {
    (void)client.progress();
    result = client.next_send_result();
    pollfd entry{receiver.fd(), POLLIN, 0};
    if (!armed || ::poll(&entry, 1, 1) > 0) {
      (void)receiver.progress();
    }
  }
  EXPECT_FALSE(armed) << "arm() let the worker sleep with a confirmation queued";
  ASSERT_TRUE(result) << "the sender never learned that its tensor was delivered";
  EXPECT_TRUE(result->outcome);
}

// A landing that UCX completes with an error status while the connection stays up (a transport's
// local failure, e.g. a CUDA copy into device memory: UCS_ERR_IO_ERROR) was dropped as if its peer
// were gone: no answer, no refusal, the connection kept. Its send then never ends and, with a
// window of one, every later send() is kBackpressured for ever.
TEST(UcxUnanswered, ALandingThatFailsWhileTheConnectionStaysUpEndsItsSend) {
  WindowOfOne sides;
  auto& [receiver, client, link, pool] = sides;
  ASSERT_TRUE(link.client) << to_string(link.client.error());
  std::vector<std::string> reported;
  std::optional<ucx::SendResult> result;
  {
    FailingLandings failing(UCS_ERR_IO_ERROR);
    ASSERT_TRUE(client.send(*link.client, small_tensor(pool)));
    const auto until = Clock::now() + std::chrono::seconds(3);
    while (!result && Clock::now() < until) {
      (void)client.progress();
      result = client.next_send_result();
      auto received = receiver.receive(1);
      if (!received) {
        reported.push_back(to_string(received.error()));
      } else if (*received) {
        reported.push_back("tensor " + std::to_string((*received)->sequence));
      }
    }
    ASSERT_EQ(failing.failed(), 1u) << "the landing was not made to fail";
  }
  ASSERT_TRUE(result) << "the send never ended (receiver reported " << reported.size()
                      << " things, connected: " << receiver.connected(link.listener) << ")";
  EXPECT_FALSE(result->outcome) << "a tensor that never landed was reported delivered";
  auto next = client.send(*link.client, small_tensor(pool));
  EXPECT_TRUE(next || next.error().code != ErrorCode::kBackpressured)
      << "the window stays full: " << to_string(next.error());
}

// A confirmation that UCX took and then failed while the endpoint stayed up left its send waiting
// for an answer that never came: the connection ends instead, and the send with it.
TEST(UcxUnanswered, AConfirmationUcxFailsUnderWayEndsTheConnectionAndTheSend) {
  WindowOfOne sides;
  auto& [receiver, client, link, pool] = sides;
  ASSERT_TRUE(link.client) << to_string(link.client.error());
  std::optional<ucx::SendResult> result;
  {
    FailingControlsUnderWay failing(ucx::MessageId::kAck, UCS_ERR_IO_ERROR);
    ASSERT_TRUE(client.send(*link.client, small_tensor(pool)));
    bool taken = false;
    const auto until = Clock::now() + std::chrono::seconds(3);
    while (!result && Clock::now() < until) {
      (void)client.progress();
      result = client.next_send_result();
      if (taken) {
        (void)receiver.progress();
        continue;
      }
      auto received = receiver.receive(1);
      ASSERT_TRUE(received) << to_string(received.error());
      taken = received->has_value();
    }
    ASSERT_EQ(failing.failed(), 1u) << "the confirmation was not made to fail";
  }
  ASSERT_TRUE(result) << "the send never ended";
  ASSERT_FALSE(result->outcome) << "reported delivered without a confirmation";
  EXPECT_EQ(result->outcome.error().code, ErrorCode::kClosed) << result->outcome.error().message;
  EXPECT_FALSE(receiver.connected(link.listener));
}

// The same confirmation, taken by UCX while there was no host memory to keep its request: the
// request was let go, so its failure under way went unnoticed and the send never ended. Each
// allocation of the receiver's calls is made to fail in turn (the client's are exempt).
TEST(UcxUnanswered, AConfirmationTakenWithoutMemoryToKeepItStillEndsItsSendWhenItFails) {
  bool swept = false;
  for (std::uint64_t skip = 0; skip < 200 && !swept; ++skip) {
    SCOPED_TRACE("allocation " + std::to_string(skip));
    WindowOfOne sides;
    auto& [receiver, client, link, pool] = sides;
    ASSERT_TRUE(link.client) << to_string(link.client.error());
    std::optional<ucx::SendResult> result;
    std::uint64_t failed = 0;
    {
      FailingControlsUnderWay failing_ack(ucx::MessageId::kAck, UCS_ERR_IO_ERROR);
      ASSERT_TRUE(client.send(*link.client, small_tensor(pool)));
      bool taken = false;
      const auto until = Clock::now() + std::chrono::seconds(3);
      FailingAllocations failing(skip);  // no gtest macro until it is gone
      while (!result && Clock::now() < until) {
        {
          AllocationsNeverFail client_side;
          (void)client.progress();
          result = client.next_send_result();
        }
        if (taken) {
          (void)receiver.progress();
        } else if (auto received = receiver.receive(1); received && received->has_value()) {
          taken = true;
        }
      }
      failed = failing.failed();
    }
    ASSERT_TRUE(result) << "the send never ended";
    EXPECT_FALSE(result->outcome) << "reported delivered without a confirmation";
    swept = failed == 0;  // the receiver's calls made fewer allocations than `skip`: all tried
  }
  EXPECT_TRUE(swept) << "more allocations than the sweep tries";
}

// The disconnect contract: receive() reports nothing more of a peer this side disconnected. When
// the peer had already gone (its worker destroyed) before disconnect() was called, its tensor that
// landed and its kClosed were still reported after the disconnect.
TEST(UcxUnanswered, DisconnectingAPeerAlreadyLostReportsNothingMoreOfIt) {
  auto receiver = make_worker();
  auto client = std::make_unique<ucx::Worker>(make_worker());
  const auto link = connect_in_process(receiver, *client);
  ASSERT_TRUE(link.client) << to_string(link.client.error());
  auto pool = host_pool(2);
  ASSERT_TRUE(client->send(*link.client, small_tensor(pool)));
  for (int i = 0; i < 200; ++i) {  // the tensor lands; nobody takes it
    (void)client->progress();
    (void)receiver.progress();
  }
  client.reset();  // the peer leaves
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (receiver.connected(link.listener) && Clock::now() < deadline) {
    (void)receiver.progress();
  }
  ASSERT_FALSE(receiver.connected(link.listener));
  ASSERT_TRUE(receiver.disconnect(link.listener));
  EXPECT_EQ(reports_within(receiver, 300), std::vector<std::string>{});
}

// An event loop on its own thread, as the API describes it: sleep on fd() when arm() says so
// (4 s at most here), progress() when it is readable, poll while waiting() is not zero. Another
// thread hands out a tensor that had landed (its confirmation is queued for the next round) or
// sends one held for its readiness (it must be polled): work queued after arm() said "sleep",
// which made fd() readable before, so the loop slept on, the sender waiting for its confirmation
// and the held tensor staying held until the loop's poll timed out.
TEST(UcxUnanswered, WorkQueuedWhileAnEventLoopSleepsOnTheFdWakesIt) {
  FakeCudaScope cuda;
  WindowOfOne sides;
  auto& [receiver, client, link, pool] = sides;
  ASSERT_TRUE(link.client) << to_string(link.client.error());
  constexpr int kSleepMs = 4000;
  // The receiver's event loop.
  std::atomic<bool> done{false};
  std::atomic<int> sleeping{0};
  std::thread loop([&] {
    while (!done.load()) {
      if (receiver.waiting() == 0 && receiver.arm()) {
        pollfd entry{receiver.fd(), POLLIN, 0};
        sleeping.store(1);
        (void)::poll(&entry, 1, kSleepMs);
        sleeping.store(0);
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
      (void)receiver.progress();
    }
  });
  const auto asleep = [&] {
    for (int i = 0; i < 200; ++i) {  // asleep, and still asleep a moment later
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      if (sleeping.load() == 1) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        if (sleeping.load() == 1) {
          return true;
        }
      }
    }
    return false;
  };
  // 1. A confirmation queued by receive() on this thread.
  ASSERT_TRUE(client.send(*link.client, small_tensor(pool)));
  std::optional<ucx::Received> received;
  for (const auto until = Clock::now() + std::chrono::seconds(5);
       !received && Clock::now() < until;) {
    (void)client.progress();
    if (asleep()) {  // landed in the loop's rounds; taken here, with no round of its own
      auto got = receiver.receive(0);
      ASSERT_TRUE(got) << to_string(got.error());
      if (*got) {
        received = std::move(**got);
      }
    }
  }
  ASSERT_TRUE(received) << "nothing arrived";
  auto taken = Clock::now();
  std::optional<ucx::SendResult> result;
  while (!result && Clock::now() - taken < std::chrono::seconds(10)) {
    (void)client.progress();
    result = client.next_send_result();
  }
  const auto confirmed_after =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - taken).count();
  ASSERT_TRUE(result) << "the sender never learned that its tensor was delivered";
  EXPECT_LT(confirmed_after, kSleepMs / 2) << "ms before the confirmation went out";
  received.reset();
  // 2. A send held for its readiness, from this thread to the client.
  auto tensor = ucx_series::pooled(*pool, 0);
  ASSERT_TRUE(tensor);
  cudaStream_t producer = cuda->create_stream(0);
  cuda->launch(producer);
  ASSERT_TRUE(tensor->set_readiness_stream(producer));
  ASSERT_TRUE(asleep());
  ASSERT_TRUE(receiver.send(link.listener, *tensor));
  cuda->complete(producer);
  taken = Clock::now();
  std::optional<ucx::Received> back;
  while (!back && Clock::now() - taken < std::chrono::seconds(10)) {
    auto got = client.receive(1);
    ASSERT_TRUE(got) << to_string(got.error());
    if (*got) {
      back = std::move(**got);
    }
  }
  const auto left_after =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - taken).count();
  done.store(true);
  loop.join();
  ASSERT_TRUE(back) << "the held tensor never left";
  EXPECT_EQ(ucx_series::check(0, back->tensor), "");
  EXPECT_LT(left_after, kSleepMs / 2) << "ms before the ready tensor left";
}

// Whether fd() becomes readable within `ms` (what an event loop asleep on it would see).
bool readable_within(const ucx::Worker& worker, int ms) {
  pollfd entry{worker.fd(), POLLIN, 0};
  return ::poll(&entry, 1, ms) > 0;
}

// An event loop that found nothing, then armed: between the two, another thread's call (a wait
// in accept()) made the progress round that landed a tensor. That round took UCX's events off
// fd(), so an arm() that asked UCX alone said "sleep" and the loop slept on with the tensor
// landed, its sender (window of one) waiting for the confirmation.
TEST(UcxUnanswered, ATensorLandedByAnotherThreadsRoundKeepsTheEventLoopAwake) {
  WindowOfOne sides;
  auto& [receiver, client, link, pool] = sides;
  ASSERT_TRUE(link.client) << to_string(link.client.error());
  // This thread is the receiver's event loop: quiet, it arms and finds nothing.
  (void)arm_once_quiet(receiver);
  (void)receiver.progress();  // awake
  auto nothing = receiver.receive(0);
  ASSERT_TRUE(nothing && !*nothing);
  ASSERT_TRUE(client.send(*link.client, small_tensor(pool)));
  // Another thread's accept() waits make the rounds; the client's rounds send the tensor.
  std::atomic<bool> stop{false};
  std::thread other([&] {
    while (!stop.load()) {
      (void)receiver.accept(5);
    }
  });
  for (const auto until = Clock::now() + std::chrono::milliseconds(300); Clock::now() < until;) {
    (void)client.progress();
  }
  stop.store(true);
  other.join();
  const bool armed = receiver.arm();
  const bool woken = !armed || readable_within(receiver, 1000);
  auto received = receiver.receive(0);
  ASSERT_TRUE(received) << to_string(received.error());
  ASSERT_TRUE(*received) << "the tensor had not landed in the other thread's rounds";
  EXPECT_TRUE(woken) << "arm() let the loop sleep with a tensor landed, and fd() stayed quiet";
  EXPECT_EQ(ucx_series::check(0, (*received)->tensor), "");
}

// An event loop asleep on fd() after arm(); another thread's progress() ran meanwhile (the
// event loop was not woken by it), then a receive() handed out a tensor that had landed: its
// confirmation must still make fd() readable. The other thread's progress() had counted as the
// loop's own, so the confirmation was only noted for an arm() that never came.
TEST(UcxUnanswered, AnotherThreadsProgressDoesNotTakeTheEventLoopsWakeUp) {
  WindowOfOne sides;
  auto& [receiver, client, link, pool] = sides;
  ASSERT_TRUE(link.client) << to_string(link.client.error());
  land_untaken(sides);
  ASSERT_TRUE(arm_once_quiet(receiver)) << "the receiver never became quiet";
  // This thread now sleeps on fd() (by not calling the worker); another thread progresses.
  std::thread([&] { (void)receiver.progress(); }).join();
  std::optional<ucx::Received> received;
  std::thread([&] {
    auto got = receiver.receive(0);  // landed already: handed out without a round
    if (got && *got) {
      received = std::move(**got);
    }
  }).join();
  ASSERT_TRUE(received) << "nothing arrived";
  EXPECT_TRUE(readable_within(receiver, 1000))
      << "a confirmation was queued while the loop slept, and fd() stayed quiet";
  // The loop wakes and progresses: the sender learns its tensor was delivered.
  std::optional<ucx::SendResult> result;
  for (const auto until = Clock::now() + std::chrono::seconds(5);
       !result && Clock::now() < until;) {
    (void)receiver.progress();
    (void)client.progress();
    result = client.next_send_result();
  }
  ASSERT_TRUE(result) << "the sender never learned that its tensor was delivered";
  EXPECT_TRUE(result->outcome);
}

// A sender disconnects from a peer that stalls: the receiver's one pool block is held by its
// application, so the next tensors (rendezvous, 1 MiB) wait there for memory and UCX cannot
// finish sending them. The disconnect must still end every send (kClosed) and drop its claims,
// rather than wait for the stalled peer for good.
TEST(UcxUnanswered, DisconnectingAStalledPeerEndsItsSendsAndDropsTheirClaims) {
  constexpr std::size_t kBytes = std::size_t{1} << 20;
  auto receive_pool = TensorPool::create({PoolMemory::kHost, 0, kBytes, 1});
  ASSERT_TRUE(receive_pool);
  ucx::WorkerConfig receiving;
  receiving.receive_pool = *receive_pool;
  ucx::Worker receiver = make_worker(receiving);
  ucx::Worker client = make_worker(with_window(3));
  InProcessLink link = connect_in_process(receiver, client);
  ASSERT_TRUE(link.client) << to_string(link.client.error());
  auto send_pool = TensorPool::create({PoolMemory::kHost, 0, kBytes, 3});
  ASSERT_TRUE(send_pool);
  const auto send_one = [&] { ASSERT_TRUE(send_bytes(client, *link.client, **send_pool, kBytes)); };
  send_one();
  std::optional<ucx::Received> held;  // the receiver's application keeps its only block
  for (const auto until = Clock::now() + std::chrono::seconds(5); !held && Clock::now() < until;) {
    (void)client.progress();
    auto got = receiver.receive(1);
    ASSERT_TRUE(got) << to_string(got.error());
    if (*got) {
      held = std::move(**got);
    }
  }
  ASSERT_TRUE(held) << "the first tensor never arrived";
  send_one();
  send_one();
  for (const auto until = Clock::now() + std::chrono::seconds(5);
       receiver.waiting() < 2 && Clock::now() < until;) {
    (void)client.progress();
    (void)receiver.progress();
  }
  ASSERT_EQ(receiver.waiting(), 2u) << "the later tensors are not waiting for memory";
  ASSERT_TRUE(client.disconnect(*link.client));
  std::vector<ucx::SendResult> results;
  for (const auto until = Clock::now() + std::chrono::seconds(8);
       results.size() < 3 && Clock::now() < until;) {
    (void)client.progress();
    (void)receiver.progress();
    while (auto result = client.next_send_result()) {
      results.push_back(std::move(*result));
    }
  }
  ASSERT_EQ(results.size(), 3u) << "sends never ended after the disconnect";
  EXPECT_EQ(client.in_flight(), 0u);
  EXPECT_EQ((*send_pool)->available_blocks(), 3u) << "a claim of the stalled sends is still held";
}

// A sender disconnects from a peer that no longer makes progress at all (stopped, hung, or no
// longer calling into its worker): UCX cannot finish the rendezvous sends, and a close in flush
// mode waited for the peer for good, holding every send and its block. The disconnect must end
// them all (kClosed) and give the blocks back within its limit of an orderly close (1 s).
TEST(UcxUnanswered, DisconnectingAPeerThatNeverProgressesEndsItsSendsWithinTheLimit) {
  constexpr std::size_t kBytes = std::size_t{8} << 20;  // a rendezvous over tcp
  ucx::Worker receiver = make_worker();
  ucx::Worker client = make_worker(with_window(3));
  InProcessLink link = connect_in_process(receiver, client);
  ASSERT_TRUE(link.client) << to_string(link.client.error());
  auto send_pool = TensorPool::create({PoolMemory::kHost, 0, kBytes, 3});
  ASSERT_TRUE(send_pool);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(send_bytes(client, *link.client, **send_pool, kBytes));
  }
  // Only the client makes progress from here on: the receiver stalls.
  for (const auto until = Clock::now() + std::chrono::milliseconds(200); Clock::now() < until;) {
    (void)client.progress();
  }
  ASSERT_EQ(client.in_flight(), 3u) << "the sends ended although their peer stalls";
  const auto disconnected = Clock::now();
  ASSERT_TRUE(client.disconnect(*link.client));
  std::vector<ucx::SendResult> results;
  for (const auto until = disconnected + std::chrono::seconds(5);
       results.size() < 3 && Clock::now() < until;) {
    (void)client.progress();
    while (auto result = client.next_send_result()) {
      results.push_back(std::move(*result));
    }
  }
  const auto took = Clock::now() - disconnected;
  ASSERT_EQ(results.size(), 3u) << "sends to a stalled peer never ended after the disconnect";
  for (const auto& result : results) {
    ASSERT_FALSE(result.outcome);
    EXPECT_EQ(result.outcome.error().code, ErrorCode::kClosed) << result.outcome.error().message;
  }
  EXPECT_LT(took, std::chrono::seconds(3)) << "the orderly close was not cut off at its limit";
  EXPECT_EQ(client.in_flight(), 0u);
  EXPECT_EQ((*send_pool)->available_blocks(), 3u) << "a claim of the stalled sends is still held";
  // Polled a little longer, while UCX tears the forced close down; then nothing is left to poll.
  for (const auto until = Clock::now() + std::chrono::seconds(2);
       client.waiting() != 0 && Clock::now() < until;) {
    (void)client.progress();
  }
  EXPECT_EQ(client.waiting(), 0u) << "the closed connection still asks to be polled";
}

// A disconnect whose close is forced at its limit while the disconnecting side runs the documented
// event loop (sleep on fd() whenever waiting() is 0 and arm() agrees). A forced close hands UCX no
// request and tears the transports down in UCX's later progress (over tcp once the peer drained
// what was under way), which no event announces: the loop slept on, and the peer, healthy but
// slow (a round every 50 ms), learned nothing of the close (no kClosed, its landing held) for as
// long as the loop slept.
TEST(UcxUnanswered, ASlowPeerLearnsOfAForcedCloseWhileTheClosingSidesEventLoopSleeps) {
  constexpr std::size_t kBytes = std::size_t{128} << 20;  // more than a second for this peer
  ucx::Worker receiver = make_worker();
  ucx::Worker client = make_worker();
  InProcessLink link = connect_in_process(receiver, client);
  ASSERT_TRUE(link.client) << to_string(link.client.error());
  auto send_pool = TensorPool::create({PoolMemory::kHost, 0, kBytes, 1});
  ASSERT_TRUE(send_pool);
  std::atomic<bool> stop{false};
  std::atomic<bool> closed{false};
  std::atomic<long long> learned_ms{-1};
  const auto started = Clock::now();
  std::thread slow_peer([&] {
    while (!stop.load() && !closed.load()) {
      auto got = receiver.receive(0);
      if (!got) {
        closed.store(got.error().code == ErrorCode::kClosed);
        learned_ms.store(
            std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started).count());
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  ASSERT_TRUE(send_bytes(client, *link.client, **send_pool, kBytes));
  ASSERT_TRUE(client.disconnect(*link.client));
  constexpr int kSleepMs = 8000;
  for (const auto until = started + std::chrono::milliseconds(kSleepMs / 2);
       !closed.load() && learned_ms.load() < 0 && Clock::now() < until;) {
    (void)client.progress();
    while (client.next_send_result()) {
    }
    if (client.waiting() == 0 && client.arm()) {
      pollfd entry{client.fd(), POLLIN, 0};
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
      (void)::poll(&entry, 1, static_cast<int>(std::max<std::int64_t>(left.count(), 0)));
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  stop.store(true);
  slow_peer.join();
  ASSERT_TRUE(closed.load()) << "the peer learned nothing of the close while the other side slept"
                             << " (after " << learned_ms.load() << " ms)";
  // The loop above ends at kSleepMs / 2; what matters is that the peer learned at all,
  // well before it would have woken by itself. The close limit (1 s) plus a drain of the socket
  // buffers in the peer's 50 ms rounds takes longer on a loaded machine: no tighter bound here.
  EXPECT_EQ((*send_pool)->available_blocks(), 1u);
}

// The mirror case: a receiver disconnects from a sender that stalls mid-transfer. The landing UCX
// holds waited for the sender for good, and with it the receive pool's block, which every other
// peer's tensors then lacked.
TEST(UcxUnanswered, DisconnectingASenderThatNeverProgressesGivesItsLandingsBlockBack) {
  constexpr std::size_t kBytes = std::size_t{8} << 20;  // a rendezvous over tcp
  auto receive_pool = TensorPool::create({PoolMemory::kHost, 0, kBytes, 1});
  ASSERT_TRUE(receive_pool);
  ucx::WorkerConfig receiving;
  receiving.receive_pool = *receive_pool;
  ucx::Worker receiver = make_worker(receiving);
  ucx::Worker client = make_worker();
  InProcessLink link = connect_in_process(receiver, client);
  ASSERT_TRUE(link.client) << to_string(link.client.error());
  ASSERT_NE(link.listener, 0u);
  auto send_pool = TensorPool::create({PoolMemory::kHost, 0, kBytes, 1});
  ASSERT_TRUE(send_pool);
  ASSERT_TRUE(send_bytes(client, *link.client, **send_pool, kBytes));
  // Only the receiver makes progress from here on: the sender stalls before its data goes out.
  for (const auto until = Clock::now() + std::chrono::seconds(5);
       (*receive_pool)->available_blocks() != 0 && Clock::now() < until;) {
    auto got = receiver.receive(0);
    ASSERT_TRUE(got) << to_string(got.error());
    ASSERT_FALSE(*got) << "the tensor landed although its sender stalls";
  }
  ASSERT_EQ((*receive_pool)->available_blocks(), 0u) << "the landing never started";
  const auto disconnected = Clock::now();
  ASSERT_TRUE(receiver.disconnect(link.listener));
  for (const auto until = disconnected + std::chrono::seconds(5);
       (*receive_pool)->available_blocks() == 0 && Clock::now() < until;) {
    auto got = receiver.receive(0);
    ASSERT_TRUE(got) << to_string(got.error());
    ASSERT_FALSE(*got) << "receive() reported something of a peer disconnected here";
  }
  EXPECT_EQ((*receive_pool)->available_blocks(), 1u)
      << "the landing from a stalled sender still holds its block after the disconnect";
  EXPECT_LT(Clock::now() - disconnected, std::chrono::seconds(3));
}

// An event loop on a thread of its own, as the API describes one: it sleeps on fd() when arm()
// says so (at most `sleep_ms` a time), then progresses and takes the SendResults.
class SendResultLoop {
 public:
  SendResultLoop(ucx::Worker& worker, int sleep_ms)
      : worker_(worker), sleep_ms_(sleep_ms), thread_([this] { run(); }) {}
  ~SendResultLoop() { stop(); }
  SendResultLoop(const SendResultLoop&) = delete;
  SendResultLoop& operator=(const SendResultLoop&) = delete;

  // Whether the loop sleeps in its poll() now (seen within 2 s): only the fd can then end the
  // sleep before its limit.
  bool asleep() {
    const auto until = Clock::now() + std::chrono::seconds(2);
    while (!sleeping_.load() && Clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    (void)wait_until_asleep(id_.load(), std::chrono::milliseconds(500));  // into its poll()
    return sleeping_.load();
  }
  // The SendResults taken so far.
  int results() const { return results_.load(); }
  // Waits up to twice the loop's sleep for a first SendResult; how long it waited, in ms.
  long long ms_until_a_result(Clock::time_point since) const {
    while (results_.load() == 0 &&
           Clock::now() < since + std::chrono::milliseconds(2 * sleep_ms_)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - since).count();
  }
  // Ends the loop, after its current sleep.
  void stop() {
    stop_.store(true);
    if (thread_.joinable()) {
      thread_.join();
    }
  }

 private:
  void run() {
    id_.store(current_thread_id());
    while (!stop_.load()) {
      if (worker_.arm()) {
        pollfd entry{worker_.fd(), POLLIN, 0};
        sleeping_.store(true);
        (void)::poll(&entry, 1, sleep_ms_);
        sleeping_.store(false);
      }
      (void)worker_.progress();
      while (worker_.next_send_result()) {
        results_.fetch_add(1);
      }
    }
  }

  ucx::Worker& worker_;
  const int sleep_ms_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> sleeping_{false};  // set around the poll()
  std::atomic<int> results_{0};
  std::atomic<pid_t> id_{0};
  std::thread thread_;  // last: starts once the members it uses are made
};

// An event loop asleep on the client's fd() (arm() said it may sleep) must wake for what another
// thread's send() did outside a progress round: here a send UCX refuses at once, whose result is
// queued by send() itself and announced by no UCX event. It slept on to the end of its wait.
TEST(UcxUnanswered, AnEventLoopAsleepOnFdWakesForASendRefusedAtOnce) {
  WindowOfOne sides;
  auto& [receiver, client, link, pool] = sides;
  ASSERT_TRUE(link.client) << to_string(link.client.error());
  constexpr int kSleepMs = 2000;
  SendResultLoop loop(client, kSleepMs);
  // Asleep (a wake-up before the send would have had nothing to take): only the fd can end
  // this sleep within half its length.
  ASSERT_TRUE(loop.asleep()) << "the event loop was not asleep on fd() when the send came";
  const auto sent_at = Clock::now();
  {
    FailingAmSends failing(ucx::MessageId::kTensor, UCS_ERR_IO_ERROR);
    auto sent = client.send(*link.client, small_tensor(pool));
    ASSERT_TRUE(sent) << to_string(sent.error());
    ASSERT_EQ(failing.failed(), 1u) << "the send was not refused";
  }
  const auto waited = loop.ms_until_a_result(sent_at);
  loop.stop();
  EXPECT_EQ(loop.results(), 1);
  EXPECT_LT(waited, kSleepMs / 2) << "ms before the event loop saw the refused send's result";
}

// The same event loop, woken by a disconnect() that ran out of host memory partway: what it left
// (the peer's sends to end, its connection to close) is the next round's work, which no UCX event
// announces. The loop slept on to the end of its wait, the sends in flight meanwhile.
TEST(UcxUnanswered, AnEventLoopAsleepOnFdWakesForADisconnectOutOfMemory) {
  WindowOfOne sides;
  auto& [receiver, client, link, pool] = sides;
  ASSERT_TRUE(link.client) << to_string(link.client.error());
  constexpr int kSleepMs = 2000;
  // The receiver never progresses, so the send stays unconfirmed.
  ASSERT_TRUE(client.send(*link.client, small_tensor(pool)));
  SendResultLoop loop(client, kSleepMs);
  ASSERT_TRUE(loop.asleep()) << "the event loop was not asleep on fd() when disconnect() came";
  ASSERT_EQ(client.in_flight(), 1u);
  const auto asked_at = Clock::now();
  {
    FailingAllocations failing(0);  // the first allocation of the disconnect fails
    auto disconnected = client.disconnect(*link.client);
    ASSERT_FALSE(disconnected) << "the disconnect needed no memory";
    EXPECT_EQ(disconnected.error().code, ErrorCode::kResourceExhausted);
  }
  EXPECT_FALSE(client.connected(*link.client)) << "up after disconnect() until the next round";
  const auto waited = loop.ms_until_a_result(asked_at);
  loop.stop();
  EXPECT_EQ(loop.results(), 1) << "the send to the disconnected peer never ended";
  EXPECT_LT(waited, kSleepMs / 2) << "ms before the event loop ended the disconnect";
  EXPECT_FALSE(client.connected(*link.client));
}

}  // namespace
}  // namespace holoscan::test
