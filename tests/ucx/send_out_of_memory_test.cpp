// A sender out of host memory while it takes in the answers to its tensors, or while UCX refuses a
// tensor at once (each allocation made to fail in turn, support/allocation_hooks): whatever fails,
// every send() that returned a sequence number ends as exactly one SendResult, and none other does.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "support/allocation_hooks.hpp"
#include "ucx/failing_am_send.hpp"
#include "ucx/series.hpp"
#include "ucx/ucx_test_support.hpp"

namespace holoscan::test {
namespace {

constexpr int kPatienceMs = 20000;
constexpr std::uint64_t kTensors = 8;  // answers enough that keeping them needs the heap

// One attempt on a fresh connection: the receiver hands out every tensor and its Acks go out,
// then the sender takes them in with the allocation after the first `skip` failing; whether one
// failed (false: `skip` is past them).
bool answers_with_failing_allocation(std::uint64_t skip) {
  LinkedWorkers sides;
  EXPECT_TRUE(sides.link.client);
  if (!sides.link.client) {
    return false;
  }
  ucx::Worker& receiver = sides.receiver;
  SeriesSender sender(sides.client, *sides.link.client, kTensors);
  for (std::uint64_t i = 0; i < kTensors; ++i) {
    EXPECT_TRUE(sender.send(0));
  }
  std::uint64_t handed_out = 0;
  for (int i = 0; i < 1000 && handed_out < kTensors; ++i) {
    auto got = receiver.receive(10);
    handed_out += got && *got ? 1 : 0;
    (void)sides.client.progress();  // posts what UCX did not take at once; takes in no answer yet
  }
  EXPECT_EQ(handed_out, kTensors);
  for (int i = 0; i < 20; ++i) {
    (void)receiver.progress();  // the Acks go out
  }
  std::uint64_t failed = 0;
  {
    FailingAllocations failing(skip);
    for (int i = 0; i < 20; ++i) {
      try {
        (void)sides.client.progress();
      } catch (...) {
        ADD_FAILURE() << "an exception escaped the worker";
      }
    }
    failed = failing.failed();
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kPatienceMs);
  // A connection the sender ended (out of memory for an answer) is seen ended by the receiver
  // too, so that neither worker goes with the close under way.
  while ((sender.delivered.size() + sender.failed.size() < kTensors ||
          sides.client.connected(*sides.link.client) != receiver.connected(sides.link.listener)) &&
         std::chrono::steady_clock::now() < deadline) {
    (void)receiver.progress();
    sender.drain();
  }
  SCOPED_TRACE("allocation " + std::to_string(skip));
  EXPECT_EQ(sender.delivered.size() + sender.failed.size(), kTensors)
      << "a send never ended as a SendResult";
  std::vector<std::uint64_t> ended = sender.delivered;
  for (const auto& [sequence, error] : sender.failed) {
    ended.push_back(sequence);
  }
  std::sort(ended.begin(), ended.end());
  EXPECT_TRUE(std::adjacent_find(ended.begin(), ended.end()) == ended.end())
      << "a send ended twice";
  EXPECT_EQ(sides.client.in_flight(), 0u);
  return failed != 0;
}

TEST(UcxSendOutOfMemory, EverySendEndsOnceWhateverAllocationFails) {
  for_each_failing_allocation(answers_with_failing_allocation);
}

// One attempt on a fresh connection: tensor 0 sent while UCX refuses it at once, with the
// allocation after the first `skip` of that send() failing; whether one failed.
bool refused_send_with_failing_allocation(std::uint64_t skip) {
  LinkedWorkers sides;
  EXPECT_TRUE(sides.link.client);
  if (!sides.link.client) {
    return false;
  }
  SeriesSender source(sides.client, *sides.link.client, 1);  // its pool only
  const auto layout = ucx_series::layout(0);
  auto tensor = source.pool->allocate(layout.shape, layout.dtype);
  EXPECT_TRUE(tensor);
  if (!tensor) {
    return false;
  }
  std::optional<expected<std::uint64_t, Error>> sent;
  std::uint64_t failed = 0;
  {
    FailingAmSends refused(ucx::MessageId::kTensor, UCS_ERR_IO_ERROR);
    FailingAllocations failing(skip);
    try {
      sent.emplace(sides.client.send(*sides.link.client, *tensor));
    } catch (...) {
      ADD_FAILURE() << "an exception escaped the worker";
    }
    failed = failing.failed();
  }
  std::vector<ucx::SendResult> results;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while ((sides.client.in_flight() != 0 || (sent && *sent && results.empty())) &&
         std::chrono::steady_clock::now() < deadline) {
    (void)sides.receiver.progress();
    (void)sides.client.progress();
    while (auto result = sides.client.next_send_result()) {
      results.push_back(std::move(*result));
    }
  }
  SCOPED_TRACE("allocation " + std::to_string(skip));
  if (sent && *sent) {
    EXPECT_EQ(results.size(), 1u) << "the send did not end as one SendResult";
    for (const ucx::SendResult& result : results) {
      EXPECT_EQ(result.sequence, **sent);
      EXPECT_FALSE(result.outcome) << "a tensor UCX refused reported delivered";
    }
  } else {
    EXPECT_TRUE(results.empty()) << "a send that returned no sequence number ended";
  }
  EXPECT_EQ(sides.client.in_flight(), 0u) << "a send in flight for ever";
  return failed != 0;
}

// One attempt on a fresh connection: kTensors sent and never received, then disconnect() with
// the allocation after the first `skip` of it failing; whether one failed. A disconnect() that
// ran out of memory partway ended some sends and left the others in flight for ever, on a
// connection neither lost nor failed.
bool disconnect_with_failing_allocation(std::uint64_t skip) {
  LinkedWorkers sides;
  EXPECT_TRUE(sides.link.client);
  if (!sides.link.client) {
    return false;
  }
  const ucx::PeerId peer = *sides.link.client;
  constexpr std::uint64_t kSent = 3;  // enough that one ends and the next fails to
  SeriesSender sender(sides.client, peer, kSent);
  for (std::uint64_t i = 0; i < kSent; ++i) {
    EXPECT_TRUE(sender.send(0));
  }
  std::optional<expected<void, Error>> disconnected;
  std::uint64_t failed = 0;
  {
    FailingAllocations failing(skip);
    try {
      disconnected.emplace(sides.client.disconnect(peer));
    } catch (...) {
      ADD_FAILURE() << "an exception escaped the worker";
    }
    failed = failing.failed();
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  while ((sender.delivered.size() + sender.failed.size() < kSent || sides.client.connected(peer)) &&
         std::chrono::steady_clock::now() < deadline) {
    (void)sides.receiver.progress();
    sender.drain();
  }
  SCOPED_TRACE("allocation " + std::to_string(skip));
  EXPECT_EQ(sender.delivered.size() + sender.failed.size(), kSent)
      << "a send never ended as a SendResult";
  EXPECT_EQ(sides.client.in_flight(), 0u) << "a send in flight for ever";
  EXPECT_FALSE(sides.client.connected(peer)) << "the connection stayed up after disconnect()";
  for (int i = 0; i < 20; ++i) {
    auto reported = sides.client.receive(0);
    EXPECT_TRUE(reported && !*reported) << "receive() reported the peer after disconnect()";
  }
  return failed != 0;
}

TEST(UcxSendOutOfMemory, ADisconnectOutOfMemoryStillEndsEverySendAndTheConnection) {
  for_each_failing_allocation(disconnect_with_failing_allocation);
}

// A receiver whose disconnect() runs out of host memory while a rendezvous-sized tensor of that
// peer is still landing: the landing ends in a later round that runs out of memory again before
// it ends the connection. receive() handed that tensor out meanwhile (and its sender learned it
// delivered), although disconnect() had said nothing more of the peer would come.
TEST(UcxSendOutOfMemory, NothingLandingWhenADisconnectRanOutOfMemoryIsHandedOut) {
  auto receive_pool = TensorPool::create({PoolMemory::kHost, 0, ucx_series::kMaxBytes, 2});
  ASSERT_TRUE(receive_pool);
  ucx::WorkerConfig config;
  config.receive_pool = *receive_pool;
  ucx::Worker receiver = make_worker(config);
  ucx::Worker client = make_worker();
  const InProcessLink link = connect_in_process(receiver, client);
  ASSERT_TRUE(link.client) << to_string(link.client.error());
  SeriesSender sender(client, *link.client, 2);
  ASSERT_TRUE(sender.send(2));  // rendezvous-sized: it lands only as the client answers
  // The client's rounds offer the tensor, the receiver's take a block for it and ask for the
  // data; the client is not progressed again before the disconnect, so none of it comes yet.
  for (int i = 0; i < 50 && (*receive_pool)->available_blocks() != 1; ++i) {
    (void)client.progress();
    (void)receiver.progress();
  }
  ASSERT_EQ((*receive_pool)->available_blocks(), 1u) << "the tensor did not begin to land";
  {
    FailingAllocations failing(0);
    auto disconnected = receiver.disconnect(link.listener);
    ASSERT_FALSE(disconnected) << "the disconnect needed no memory";
    EXPECT_EQ(disconnected.error().code, ErrorCode::kResourceExhausted);
  }
  // Rounds that land what comes but cannot end the connection (every allocation fails); then a
  // receive(), which looks at what landed before its own round would end the connection.
  for (int i = 0; i < 200; ++i) {
    sender.drain();
    FailingAllocations failing(0, std::numeric_limits<std::uint64_t>::max());
    try {
      (void)receiver.progress();
    } catch (...) {
      ADD_FAILURE() << "an exception escaped the worker";
    }
  }
  EXPECT_FALSE(receiver.connected(link.listener)) << "up after disconnect()";
  // The connection is not ended yet (that would drop the tensor and give its block back).
  ASSERT_EQ((*receive_pool)->available_blocks(), 1u) << "a round ended the connection after all";
  auto got = receiver.receive(0);
  ASSERT_TRUE(got) << to_string(got.error());
  ASSERT_FALSE(*got) << "a tensor of a peer disconnect() had ended was handed out";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kPatienceMs);
  while (sender.delivered.empty() && sender.failed.empty() &&
         std::chrono::steady_clock::now() < deadline) {
    (void)receiver.progress();
    sender.drain();
  }
  ASSERT_EQ(sender.failed.size(), 1u) << "the send never ended as failed";
  EXPECT_TRUE(sender.delivered.empty()) << "the sender was told its tensor was delivered";
  EXPECT_FALSE(receiver.connected(link.listener));
  EXPECT_EQ((*receive_pool)->available_blocks(), 2u) << "the landing kept its block";
}

TEST(UcxSendOutOfMemory, ASendUcxRefusesAtOnceEndsOnceWhateverAllocationFails) {
  for_each_failing_allocation(refused_send_with_failing_allocation);
}

// Results a worker's queue of SendResults (a std::deque) holds before its next one needs a new
// block of memory (libstdc++: 512-byte blocks), so that ending the next send allocates.
constexpr std::size_t kResultsBeforeANewBlock =
    (sizeof(ucx::SendResult) < 512 ? 512 / sizeof(ucx::SendResult) : 1) - 1;

// One attempt on a fresh connection: a rendezvous-sized tensor is posted to a receiver that never
// takes it (after kResultsBeforeANewBlock delivered ones whose results wait unread), the receiver
// is disconnected and goes, and the client takes in UCX's end of the send with the allocation
// after the first `skip` failing; whether one failed. With memory back, the send
// must end once, failed, and nothing may stay in flight.
bool lost_peer_send_with_failing_allocation(std::uint64_t skip) {
  auto receiver = std::make_unique<ucx::Worker>(make_worker());
  ucx::Worker client = make_worker();
  const InProcessLink link = connect_in_process(*receiver, client);
  EXPECT_TRUE(link.client);
  if (!link.client) {
    return false;
  }
  SeriesSender sender(client, *link.client, kResultsBeforeANewBlock + 1);
  for (std::size_t i = 0; i < kResultsBeforeANewBlock; ++i) {
    EXPECT_TRUE(sender.send(0));
  }
  for (int i = 0; i < 2000 && client.in_flight() != 0; ++i) {
    (void)receiver->receive(1);
    (void)client.progress();  // their results stay queued: the next one needs a new block
  }
  EXPECT_EQ(client.in_flight(), 0u);
  EXPECT_TRUE(sender.send(2));  // rendezvous-sized: UCX holds it until the receiver fetches it
  for (int i = 0; i < 20; ++i) {
    (void)client.progress();
  }
  EXPECT_EQ(client.in_flight(), 1u);
  // Ended here first (the send's outcome is kClosed at once, UCX still holds it), then the
  // receiver goes, so that UCX gives the send back after its peer was lost.
  EXPECT_TRUE(client.disconnect(*link.client));
  receiver.reset();
  std::uint64_t failed = 0;
  {
    FailingAllocations failing(skip);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    int rounds_after_loss = 0;
    while (rounds_after_loss < 50 && std::chrono::steady_clock::now() < deadline) {
      try {
        (void)client.progress();
      } catch (...) {
        ADD_FAILURE() << "an exception escaped the worker";
      }
      rounds_after_loss += client.connected(*link.client) ? 0 : 1;
    }
    failed = failing.failed();
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kPatienceMs);
  while (sender.delivered.size() + sender.failed.size() < kResultsBeforeANewBlock + 1 &&
         std::chrono::steady_clock::now() < deadline) {
    sender.drain();
  }
  SCOPED_TRACE("allocation " + std::to_string(skip));
  EXPECT_EQ(sender.delivered.size(), kResultsBeforeANewBlock);
  EXPECT_EQ(sender.failed.size(), 1u) << "the send to the lost peer did not end as one SendResult";
  EXPECT_EQ(client.in_flight(), 0u) << "a send in flight for ever";
  return failed != 0;
}

TEST(UcxSendOutOfMemory, ASendToALostPeerEndsOnceWhateverAllocationFails) {
  for_each_failing_allocation(lost_peer_send_with_failing_allocation);
}

}  // namespace
}  // namespace holoscan::test
