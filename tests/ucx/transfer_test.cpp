// Host tensors between two processes over TCP on the loopback (the CTest environment sets
// UCX_TLS=tcp): every byte checked, the received tensors owned by the receiver, the sender's pool
// blocks reused only once UCX is done with them.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "ucx/series.hpp"
#include "ucx/ucx_test_support.hpp"

namespace holoscan::test {
namespace {

constexpr int kPatienceMs = 20000;

TEST(UcxTransfer, HostTensorsArriveIntactInMemoryTheReceiverOwns) {
  constexpr std::uint64_t kCount = 40;
  std::vector<Tensor> kept;
  {
    auto [pool, worker, peer] = connect_sender(0, {"count=40", "window=4"});
    for (std::uint64_t k = 0; k < kCount; ++k) {
      auto received = worker.receive(kPatienceMs);
      ASSERT_TRUE(received) << to_string(received.error());
      ASSERT_TRUE(received->has_value()) << "tensor " << k << " did not come";
      ucx::Received& got = **received;
      EXPECT_EQ(got.sequence, k + 1);
      EXPECT_EQ(ucx_series::check(k, got.tensor), "");
      EXPECT_EQ(got.tensor.device().device_type, kDLCPU);
      EXPECT_FALSE(got.tensor.is_read_only()) << "the receiver owns the copy";
      kept.push_back(std::move(got.tensor));
    }
    EXPECT_EQ(wait_peer(peer, kPatienceMs, &worker), 0) << "the sender saw a send fail";
    EXPECT_EQ(worker.stats().received, kCount);
  }
  // The worker is gone; the tensors still own their memory, and it is writable.
  for (std::uint64_t k = 0; k < kCount; ++k) {
    EXPECT_EQ(ucx_series::check(k, kept[k]), "");
    std::memset(kept[k].data(), 0, static_cast<std::size_t>(kept[k].nbytes()));
  }
}

TEST(UcxTransfer, TensorsHandedOutJustBeforeTheWorkerGoesAreConfirmedToTheSender) {
  // The last receive() queues its Ack for the next progress round; the worker is destroyed
  // instead. The sender exits 0 only when every send was reported delivered.
  constexpr std::uint64_t kCount = 16;
  auto side = connect_sender(0, {"count=16", "window=16"});
  {
    ucx::Worker worker = std::move(side.worker);
    for (std::uint64_t k = 0; k < kCount; ++k) {
      auto received = worker.receive(kPatienceMs);
      ASSERT_TRUE(received) << to_string(received.error());
      ASSERT_TRUE(received->has_value()) << "tensor " << k << " did not come";
      EXPECT_EQ(ucx_series::check(k, (*received)->tensor), "");
    }
  }
  EXPECT_EQ(wait_peer(side.sender, kPatienceMs), 0) << "the sender counted a delivered tensor lost";
}

TEST(UcxTransfer, ArrivalsLandInTheNamedPoolAndWaitForAFreeBlock) {
  auto [pool, worker, peer] = connect_sender(3, {"count=20", "window=8"});
  std::vector<Tensor> held;
  for (std::uint64_t k = 0; k < 3; ++k) {
    auto received = worker.receive(kPatienceMs);
    ASSERT_TRUE(received && *received);
    EXPECT_EQ(ucx_series::check(k, (*received)->tensor), "");
    held.push_back(std::move((*received)->tensor));
  }
  EXPECT_EQ(pool->available_blocks(), 0u);
  // The fourth tensor waits inside UCX for a block: receive() has nothing to hand out.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (worker.stats().memory_waits == 0 && std::chrono::steady_clock::now() < deadline) {
    auto nothing = worker.receive(20);
    ASSERT_TRUE(nothing && !*nothing);
  }
  EXPECT_GE(worker.stats().memory_waits, 1u);
  EXPECT_GE(worker.waiting(), 1u);
  held.clear();  // the blocks come back; the arrivals that waited land now
  for (std::uint64_t k = 3; k < 20; ++k) {
    auto received = worker.receive(kPatienceMs);
    ASSERT_TRUE(received && *received) << "tensor " << k;
    EXPECT_EQ((*received)->sequence, k + 1);
    EXPECT_EQ(ucx_series::check(k, (*received)->tensor), "");
  }
  EXPECT_EQ(wait_peer(peer, kPatienceMs, &worker), 0);
  EXPECT_EQ(pool->available_blocks(), 3u);
}

// Two blocks for sixty tensors: each block is reused at once when it comes back. Had the claim
// been dropped before UCX finished reading, the next tensor's bytes would reach the receiver,
// which checks every byte.
TEST(UcxTransfer, SenderReusesPoolBlocksOnlyOnceUcxIsDone) {
  auto [worker, receiver, peer] = connect_receiver(8, {"count=60"});
  ASSERT_NE(peer, 0u);
  SeriesSender sender(worker, peer, 2);
  for (std::uint64_t k = 0; k < 60; ++k) {
    ASSERT_TRUE(sender.send(k));
  }
  ASSERT_TRUE(sender.finish(kPatienceMs));
  std::sort(sender.delivered.begin(), sender.delivered.end());
  EXPECT_EQ(sender.delivered, sender.sent) << "each delivered once";
  EXPECT_TRUE(sender.failed.empty());
  EXPECT_EQ(wait_peer(receiver, kPatienceMs, &worker), 0) << "the receiver found a wrong byte";
  EXPECT_EQ(worker.in_flight(), 0u);
  EXPECT_EQ(sender.pool->available_blocks(), 2u) << "every claim was dropped";
}

}  // namespace
}  // namespace holoscan::test
