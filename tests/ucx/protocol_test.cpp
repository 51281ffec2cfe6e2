// A peer that speaks the wire format by hand sends malformed tensor messages: each is refused
// with its code and a message naming the field, answered with that code, and the connection
// still carries the valid tensors sent after them. It also counts the Acks of a burst: tensors
// handed out back to back are confirmed by one message, and a refusal is never covered by one.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "ucx/failing_am_send.hpp"
#include "ucx/malformed_cases.hpp"
#include "ucx/series.hpp"
#include "ucx/ucx_test_support.hpp"

namespace holoscan::test {
namespace {

TEST(UcxProtocol, MalformedMessagesAreRefusedAndTheConnectionStaysUsable) {
  auto worker = make_worker();
  const pid_t raw = start_peer({"raw", "port=" + listen_on_loopback(worker)});
  std::uint64_t refused = 0;
  for (const WireCase& c : wire_cases()) {
    SCOPED_TRACE(c.name);
    auto received = worker.receive(20000);
    if (c.code == ErrorCode::kSuccess) {
      ASSERT_TRUE(received) << to_string(received.error());
      ASSERT_TRUE(received->has_value());
      EXPECT_EQ((*received)->sequence, c.sequence);
      EXPECT_EQ(ucx_series::check(c.series_index, (*received)->tensor), "");
      continue;
    }
    ++refused;
    ASSERT_FALSE(received) << "accepted";
    EXPECT_EQ(received.error().code, c.code) << received.error().message;
    EXPECT_NE(received.error().message.find(c.says), std::string::npos)
        << received.error().message << " does not say " << c.says;
  }
  EXPECT_EQ(wait_peer(raw, 20000, &worker), 0) << "an Ack was missing or had the wrong code";
  auto closed = worker.receive(20000);
  ASSERT_FALSE(closed);
  EXPECT_EQ(closed.error().code, ErrorCode::kClosed);
  EXPECT_EQ(worker.stats().refused, refused);
  EXPECT_EQ(worker.stats().received, 2u);
}

// The raw peer sends `count` small tensors (sequence `refused` malformed) while every block of
// the receive pool is held, so that all of them wait inside UCX; then the blocks come back and
// receive() hands the tensors out one after the other. The peer exits 0 only when each was
// answered with its code in exactly `messages` Acks.
void receive_burst(std::uint64_t count, std::uint64_t refused, std::uint64_t messages) {
  auto pool = TensorPool::create({PoolMemory::kHost, 0, 1024, count});
  ASSERT_TRUE(pool);
  std::vector<Tensor> held;
  for (std::uint64_t i = 0; i < count; ++i) {
    held.push_back(*(*pool)->allocate({1}, DLDataType{kDLUInt, 8, 1}));
  }
  ucx::WorkerConfig config;
  config.receive_pool = *pool;
  auto worker = make_worker(config);
  const pid_t raw = start_peer({"burst", "port=" + listen_on_loopback(worker),
                                "count=" + std::to_string(count),
                                "refused=" + std::to_string(refused),
                                "messages=" + std::to_string(messages)});
  const std::size_t valid = count - (refused != 0 ? 1 : 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (worker.waiting() < valid && std::chrono::steady_clock::now() < deadline) {
    ASSERT_TRUE(worker.progress());
  }
  ASSERT_EQ(worker.waiting(), valid) << "not every tensor came";
  held.clear();
  for (std::uint64_t sequence = 1; sequence <= count; ++sequence) {
    auto received = worker.receive(20000);
    if (sequence == refused) {
      ASSERT_FALSE(received);
      EXPECT_EQ(received.error().code, ErrorCode::kProtocolError);
      continue;
    }
    ASSERT_TRUE(received && *received) << "tensor " << sequence;
    EXPECT_EQ((*received)->sequence, sequence);
    EXPECT_EQ(ucx_series::check(0, (*received)->tensor), "");
  }
  EXPECT_EQ(wait_peer(raw, 20000, &worker), 0) << "an answer was missing, wrong, or not batched";
}

// The sending side: one Ack naming a run ends every send in it, and a second answer to one of
// them changes nothing (it is counted as ignored).
TEST(UcxProtocol, OneAckEndsEverySendOfItsRun) {
  constexpr std::uint64_t kCount = 6;
  auto worker = make_worker();
  const pid_t raw = start_peer({"acker", "port=" + listen_on_loopback(worker),
                                "count=" + std::to_string(kCount)});
  const auto peer = worker.accept(20000);
  ASSERT_TRUE(peer);
  SeriesSender sender(worker, *peer, kCount);
  for (std::uint64_t k = 0; k < kCount; ++k) {
    ASSERT_TRUE(sender.send(k * 5));  // tensor 0 of the series each time: small, eager
  }
  ASSERT_TRUE(sender.finish(20000));
  // Results come in the order the sends ended (each once answered and completed by UCX).
  std::sort(sender.delivered.begin(), sender.delivered.end());
  EXPECT_EQ(sender.delivered, sender.sent);
  EXPECT_TRUE(sender.failed.empty());
  EXPECT_EQ(wait_peer(raw, 20000, &worker), 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (worker.stats().ignored_acks == 0 && std::chrono::steady_clock::now() < deadline) {
    ASSERT_TRUE(worker.progress());
  }
  EXPECT_EQ(worker.stats().ignored_acks, 1u) << "the second answer to sequence 1";
  EXPECT_EQ(worker.stats().delivered, kCount);
}

// The next SendResult of `worker`, progressing it for up to 20 s.
std::optional<ucx::SendResult> next_result(ucx::Worker& worker) {
  std::optional<ucx::SendResult> result;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!(result = worker.next_send_result()) && std::chrono::steady_clock::now() < deadline) {
    if (!worker.progress()) {
      break;
    }
  }
  return result;
}

// Starts the raw peer of `role` and takes its tensor 1 (null, with a test failure, when none came).
std::optional<ucx::Received> take_first(ucx::Worker& worker, const char* role, pid_t* raw) {
  *raw = start_peer({role, "port=" + listen_on_loopback(worker)});
  if (!worker.accept(20000)) {
    ADD_FAILURE() << "the raw peer did not connect";
    return std::nullopt;
  }
  auto received = worker.receive(20000);
  if (!received || !*received) {
    ADD_FAILURE() << "no tensor 1: " << (received ? "none" : to_string(received.error()));
    return std::nullopt;
  }
  return std::move(**received);
}

// A tensor sent back to the peer it came from carries that peer's confirmation in its header (no
// Ack of its own), and a confirmation carried by a tensor this side refuses still ends the send.
TEST(UcxProtocol, ATensorSentBackCarriesTheConfirmation) {
  auto worker = make_worker();
  pid_t raw = 0;
  const auto first = take_first(worker, "carrier", &raw);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->sequence, 1u);
  auto sent = worker.send(first->peer, first->tensor);
  ASSERT_TRUE(sent) << to_string(sent.error());
  auto refused = worker.receive(20000);
  ASSERT_FALSE(refused) << "tensor 2 was accepted";
  EXPECT_EQ(refused.error().code, ErrorCode::kInvalidArgument) << refused.error().message;
  const std::optional<ucx::SendResult> result = next_result(worker);
  ASSERT_TRUE(result) << "the send never ended";
  EXPECT_TRUE(result->outcome) << to_string(result->outcome.error());
  EXPECT_EQ(result->sequence, *sent);
  EXPECT_EQ(wait_peer(raw, 20000, &worker), 0) << "see the peer's message";
  EXPECT_EQ(worker.stats().answers_carried, 1u);
  EXPECT_EQ(worker.stats().delivered, 1u);
  EXPECT_EQ(worker.stats().ignored_acks, 0u);
}

// The first tensor sent back took the peer's confirmation and UCX refused it at once: the
// confirmation goes as an Ack (the raw peer checks that it came, and not in a header), and a run
// that did not leave in a tensor is not counted as carried.
TEST(UcxProtocol, AConfirmationOnATensorUcxFailsGoesAsAnAck) {
  auto worker = make_worker();
  pid_t raw = 0;
  const auto first = take_first(worker, "reclaimed", &raw);
  ASSERT_TRUE(first);
  std::optional<expected<std::uint64_t, Error>> refused;
  {
    FailingAmSends failing(ucx::MessageId::kTensor, UCS_ERR_IO_ERROR);
    refused.emplace(worker.send(first->peer, first->tensor));
    ASSERT_EQ(failing.failed(), 1u);
  }
  ASSERT_TRUE(*refused) << to_string(refused->error());
  const std::optional<ucx::SendResult> result = next_result(worker);
  ASSERT_TRUE(result) << "the send never ended";
  EXPECT_EQ(result->sequence, **refused);
  EXPECT_FALSE(result->outcome) << "a tensor UCX refused reported delivered";
  EXPECT_EQ(worker.stats().failed, 1u);
  auto sent = worker.send(first->peer, first->tensor);
  ASSERT_TRUE(sent) << to_string(sent.error());
  EXPECT_EQ(wait_peer(raw, 20000, &worker), 0) << "see the peer's message";
  EXPECT_EQ(worker.stats().answers_carried, 0u);
}

TEST(UcxProtocol, TensorsHandedOutBackToBackAreConfirmedByOneAck) {
  receive_burst(8, 0, 1);
}

TEST(UcxProtocol, AnAckForARunNeverCoversARefusedTensor) {
  // The refusal of 3 goes out at once; 1-2 and 4-6 are two runs.
  receive_burst(6, 3, 3);
}

}  // namespace
}  // namespace holoscan::test
