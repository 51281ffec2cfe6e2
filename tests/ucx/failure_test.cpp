// Connections that end: a receiver killed with SIGKILL while tensors are in flight (every send
// ends, every claim is dropped), a sender killed mid-stream (kClosed once, receiver memory
// back), a receiver that leaves in order, either side disconnecting while tensors are in flight
// (a receiver with arrivals waiting for a block, a sender whose receiver holds what landed), and
// a connect to nobody.
#include <signal.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "ucx/series.hpp"
#include "ucx/ucx_test_support.hpp"

namespace holoscan::test {
namespace {

constexpr int kPatienceMs = 20000;

TEST(UcxFailure, KilledReceiverEndsEverySendAndFreesEveryClaim) {
  constexpr std::uint64_t kDelivered = 5;
  constexpr std::size_t kWindow = 8;
  auto [worker, receiver, peer] =
      connect_receiver(kWindow, {"count=0", "hold_after=" + std::to_string(kDelivered)});
  ASSERT_NE(peer, 0u);
  SeriesSender sender(worker, peer, kWindow + 1);
  std::uint64_t k = 0;
  while (sender.delivered.size() < kDelivered || worker.in_flight(peer) < kWindow) {
    ASSERT_TRUE(sender.send(k++));  // the receiver stops after five: the window fills
  }
  ASSERT_EQ(worker.in_flight(peer), kWindow);
  ::kill(receiver, SIGKILL);
  EXPECT_EQ(wait_peer(receiver, kPatienceMs), -1);
  ASSERT_TRUE(sender.finish(kPatienceMs)) << "a send never ended";

  EXPECT_EQ(sender.delivered.size(), kDelivered);
  ASSERT_EQ(sender.failed.size(), kWindow);
  for (const auto& [sequence, error] : sender.failed) {
    EXPECT_EQ(error.code, ErrorCode::kClosed) << error.message;
    EXPECT_NE(error.message.find("tensor " + std::to_string(sequence)), std::string::npos)
        << error.message;
  }
  std::vector<std::uint64_t> ended = sender.delivered;
  for (const auto& failure : sender.failed) {
    ended.push_back(failure.first);
  }
  std::sort(ended.begin(), ended.end());
  EXPECT_EQ(ended, sender.sent) << "every send ended exactly once";
  EXPECT_EQ(worker.in_flight(), 0u);
  EXPECT_EQ(sender.pool->available_blocks(), kWindow + 1) << "a claim outlived the connection";
  EXPECT_FALSE(worker.connected(peer));
  auto late = worker.send(peer, sender.pool->allocate({4}, DLDataType{kDLFloat, 32, 1}).value());
  ASSERT_FALSE(late);
  EXPECT_EQ(late.error().code, ErrorCode::kClosed);
  EXPECT_EQ(worker.stats().peers_lost, 1u);
}

TEST(UcxFailure, KilledSenderGivesClosedOnceAndItsMemoryBack) {
  auto [pool, worker, sender] = connect_sender(4, {"count=0"});
  std::uint64_t k = 0;
  for (; k < 6; ++k) {
    auto received = worker.receive(kPatienceMs);
    ASSERT_TRUE(received && *received);
    EXPECT_EQ(ucx_series::check(k, (*received)->tensor), "");
  }
  ::kill(sender, SIGKILL);  // rendezvous transfers are in progress: the stream never pauses
  EXPECT_EQ(wait_peer(sender, kPatienceMs), -1);
  int closed = 0;
  for (;;) {
    auto received = worker.receive(2000);
    if (received && !*received) {
      break;
    }
    if (received) {
      // Landed before the kill (a tensor whose transfer the kill cut short is dropped).
      EXPECT_GE((*received)->sequence, ++k);
      k = (*received)->sequence;
      EXPECT_EQ(ucx_series::check(k - 1, (*received)->tensor), "");
      EXPECT_EQ(closed, 0) << "a tensor after kClosed";
      continue;
    }
    EXPECT_EQ(received.error().code, ErrorCode::kClosed) << received.error().message;
    EXPECT_NE(received.error().message.find("is gone"), std::string::npos);
    ++closed;
  }
  EXPECT_EQ(closed, 1);
  EXPECT_EQ(pool->available_blocks(), 4u) << "a transfer cut short kept its block";
}

TEST(UcxFailure, ReceiverThatLeavesFailsTheRestWithClosed) {
  auto [worker, receiver, peer] = connect_receiver(16, {"count=3"});
  ASSERT_NE(peer, 0u);
  SeriesSender sender(worker, peer, 12);
  for (std::uint64_t k = 0; k < 10; ++k) {
    ASSERT_TRUE(sender.send(k));
  }
  EXPECT_EQ(wait_peer(receiver, kPatienceMs, &worker), 0);
  ASSERT_TRUE(sender.finish(kPatienceMs));
  EXPECT_EQ(sender.delivered.size(), 3u);
  EXPECT_EQ(sender.failed.size(), 7u);
  for (const auto& failure : sender.failed) {
    EXPECT_EQ(failure.second.code, ErrorCode::kClosed);
  }
  EXPECT_EQ(sender.pool->available_blocks(), 12u);
}

TEST(UcxFailure, ConnectToAPortNobodyListensOnFails) {
  // A port that was free a moment ago.
  const int probe = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  ASSERT_EQ(::bind(probe, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(::getsockname(probe, reinterpret_cast<sockaddr*>(&address), &length), 0);
  ::close(probe);
  auto worker = make_worker();
  const auto started = std::chrono::steady_clock::now();
  auto peer = worker.connect("127.0.0.1", ntohs(address.sin_port), 3000);
  ASSERT_FALSE(peer);
  EXPECT_TRUE(peer.error().code == ErrorCode::kClosed || peer.error().code == ErrorCode::kTimeout)
      << to_string(peer.error());
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(5));
  EXPECT_EQ(worker.in_flight(), 0u);
}


TEST(UcxFailure, ReceiverThatDisconnectsWithArrivalsWaitingReportsNothingFalse) {
  auto [pool, worker, sender] = connect_sender(1, {"count=40", "window=8"});
  const auto peer = worker.accept(kPatienceMs);
  ASSERT_TRUE(peer);
  auto first = worker.receive(kPatienceMs);
  ASSERT_TRUE(first && *first);
  Tensor held = std::move((*first)->tensor);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (worker.stats().memory_waits == 0 && std::chrono::steady_clock::now() < deadline) {
    auto nothing = worker.receive(20);
    ASSERT_TRUE(nothing && !*nothing);
  }
  ASSERT_GE(worker.waiting(), 1u);
  ASSERT_TRUE(worker.disconnect(*peer));
  held = Tensor();
  std::vector<std::string> errors;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  while (std::chrono::steady_clock::now() < until) {
    auto received = worker.receive(50);
    if (!received) {
      errors.push_back(to_string(received.error()));
    } else if (*received) {
      errors.push_back("tensor " + std::to_string((*received)->sequence) + " after disconnect");
    }
  }
  EXPECT_TRUE(errors.empty()) << errors.front();
  EXPECT_EQ(worker.stats().refused, 0u);
  EXPECT_EQ(worker.waiting(), 0u);
  EXPECT_NE(wait_peer(sender, kPatienceMs, &worker), 0);
  EXPECT_EQ(pool->available_blocks(), 1u);
}


TEST(UcxFailure, SenderThatDisconnectsEndsEverySendAndGetsItsBlocksBack) {
  auto [worker, receiver, peer] = connect_receiver(8, {"count=0", "hold_after=2"});
  ASSERT_NE(peer, 0u);
  SeriesSender sender(worker, peer, 12);
  for (std::uint64_t k = 0; k < 8; ++k) {
    ASSERT_TRUE(sender.send(k));
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (sender.delivered.size() < 2 && std::chrono::steady_clock::now() < deadline) {
    sender.drain();
  }
  ASSERT_EQ(sender.delivered.size(), 2u);
  ASSERT_TRUE(worker.disconnect(peer));
  ASSERT_TRUE(sender.finish(kPatienceMs));
  EXPECT_EQ(sender.failed.size(), 6u);
  for (const auto& failure : sender.failed) {
    EXPECT_EQ(failure.second.code, ErrorCode::kClosed) << failure.second.message;
  }
  EXPECT_EQ(worker.in_flight(), 0u);
  EXPECT_EQ(sender.pool->available_blocks(), 12u);
  ::kill(receiver, SIGKILL);
  EXPECT_EQ(wait_peer(receiver, kPatienceMs, &worker), -1);
}

}  // namespace
}  // namespace holoscan::test
