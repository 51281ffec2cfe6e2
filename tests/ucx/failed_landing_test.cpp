// A landing UCX fails after it started. Where the peer's transport writes into this side's memory
// itself (CUDA IPC, RDMA: the sender puts the data), UCX completes the receive with an error as
// soon as the connection breaks while the sender's copy may still run, so the block must never be
// reused: it is kept until the process exits. Where the transports only ever have this process
// write (tcp here), the block comes back at once.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ucx/failing_am_send.hpp"
#include "ucx/failing_landing.hpp"
#include "ucx/reported_transports.hpp"
#include "ucx/series.hpp"
#include "ucx/ucx_test_support.hpp"

namespace holoscan::test {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::uint64_t kLarge = 2;  // the series' rendezvous-sized tensor

std::shared_ptr<TensorPool> host_pool(std::size_t blocks) {
  auto pool = TensorPool::create({PoolMemory::kHost, 0, ucx_series::kMaxBytes, blocks});
  EXPECT_TRUE(pool);
  return *pool;
}

Tensor large_tensor(const std::shared_ptr<TensorPool>& pool) {
  const auto layout = ucx_series::layout(kLarge);
  auto tensor = pool->allocate(layout.shape, layout.dtype);
  EXPECT_TRUE(tensor);
  ucx_series::fill(kLarge, tensor->data(), static_cast<std::size_t>(tensor->nbytes()));
  return std::move(*tensor);
}

ucx::WorkerConfig receiving_into(std::shared_ptr<TensorPool> pool) {
  ucx::WorkerConfig config;
  config.receive_pool = std::move(pool);
  return config;
}

// A receiver landing into a pool of two blocks, and a client connected to it in this process.
struct Sides {
  std::shared_ptr<TensorPool> landing = host_pool(2);
  ucx::Worker receiver = make_worker(receiving_into(landing));
  ucx::Worker client = make_worker();
  InProcessLink link = connect_in_process(receiver, client);
  std::shared_ptr<TensorPool> sending = host_pool(2);
};

// Sends one large tensor and progresses both sides until its send ends; what the receiver handed
// out meanwhile is kept in `received`.
std::optional<ucx::SendResult> send_one(Sides& sides, std::vector<Tensor>& received) {
  if (auto sent = sides.client.send(*sides.link.client, large_tensor(sides.sending)); !sent) {
    ADD_FAILURE() << "send: " << to_string(sent.error());
    return std::nullopt;
  }
  std::optional<ucx::SendResult> result;
  for (const auto until = Clock::now() + std::chrono::seconds(5);
       !result && Clock::now() < until;) {
    (void)sides.client.progress();
    result = sides.client.next_send_result();
    auto arrival = sides.receiver.receive(1);
    if (arrival && *arrival) {
      received.push_back(std::move((*arrival)->tensor));
    }
  }
  return result;
}

// Fails one started landing with `status`; nothing is handed out.
void fail_one(Sides& sides, ucs_status_t status) {
  ASSERT_TRUE(sides.link.client) << to_string(sides.link.client.error());
  std::vector<Tensor> received;
  {
    FailingLandings failing(status);
    const auto failed = send_one(sides, received);
    ASSERT_TRUE(failed) << "the failed landing's send never ended";
    EXPECT_FALSE(failed->outcome) << "a tensor that never landed was reported delivered";
    ASSERT_EQ(failing.failed(), 1u) << "the landing was not made to fail";
  }
  EXPECT_TRUE(received.empty());
}

TEST(UcxFailedLanding, APeerThatMayWriteIntoTheBlockLeavesItKeptNeverReused) {
  Sides sides;
  ReportedTransports reported({"tcp", "cuda_ipc", "cuda_copy"});
  fail_one(sides, UCS_ERR_NO_MEMORY);  // a refusal: the connection stays up
  EXPECT_GE(reported.answered(), 1u) << "the worker never asked UCX for the transports";
  EXPECT_EQ(sides.receiver.stats().landings_kept, 1u);
  EXPECT_EQ(sides.landing->available_blocks(), 1u) << "the failed landing's block came back";
  // The other block still takes tensors, and every one lands whole.
  std::vector<Tensor> received;
  const auto result = send_one(sides, received);
  ASSERT_TRUE(result) << "the next tensor's send never ended";
  ASSERT_TRUE(result->outcome) << "the next tensor was not delivered: "
                               << to_string(result->outcome.error());
  ASSERT_EQ(received.size(), 1u);
  EXPECT_EQ(ucx_series::check(kLarge, received[0]), "");
  received.clear();
  EXPECT_EQ(sides.landing->available_blocks(), 1u);
}

TEST(UcxFailedLanding, AConnectionLostMidLandingOverRdmaKeepsTheBlockToo) {
  Sides sides;
  ReportedTransports reported({"rc_mlx5", "ud_mlx5"});
  fail_one(sides, UCS_ERR_CONNECTION_RESET);
  EXPECT_EQ(sides.receiver.stats().landings_kept, 1u);
  EXPECT_EQ(sides.landing->available_blocks(), 1u) << "the failed landing's block came back";
}

// An endpoint whose query names no transport says nothing of where its lanes write: it was taken
// for one whose lanes all write locally, and the failed landing's block came back at once.
TEST(UcxFailedLanding, AnEndpointThatNamesNoTransportIsTakenAsOneThatMayWriteHere) {
  Sides sides;
  ReportedTransports reported({});
  fail_one(sides, UCS_ERR_NO_MEMORY);
  EXPECT_GE(reported.answered(), 1u) << "the worker never asked UCX for the transports";
  EXPECT_EQ(sides.receiver.stats().landings_kept, 1u);
  EXPECT_EQ(sides.landing->available_blocks(), 1u) << "the failed landing's block came back";
}

TEST(UcxFailedLanding, TransportsThatOnlyWriteHereGiveTheBlockBackAtOnce) {
  Sides sides;  // UCX's own answer: tcp on the loopback
  fail_one(sides, UCS_ERR_IO_ERROR);
  EXPECT_EQ(sides.receiver.stats().landings_kept, 0u);
  EXPECT_EQ(sides.landing->available_blocks(), 2u);
}

// A landing that UCX failed as a lost connection while the connection is in fact up: the worker
// waits one progress round for UCX's own endpoint error (the peer then "is gone", its tensors
// that landed still handed out) before it ends the connection itself. The round that ran the
// failed completion must not end it already: it did, the failure being noted as of the round
// before (the rounds were counted after UCX's progress).
TEST(UcxFailedLanding, ALandingFailedAsALostConnectionWaitsOneRoundForUcxsOwnError) {
  Sides sides;
  ASSERT_TRUE(sides.link.client) << to_string(sides.link.client.error());
  FailingLandings failing(UCS_ERR_CONNECTION_RESET);
  const std::size_t completed = failing.completed();
  ASSERT_TRUE(sides.client.send(*sides.link.client, large_tensor(sides.sending)));
  bool ran = false;
  for (const auto until = Clock::now() + std::chrono::seconds(5); !ran && Clock::now() < until;) {
    (void)sides.client.progress();
    (void)sides.receiver.progress();
    ran = failing.completed() > completed;
  }
  ASSERT_TRUE(ran) << "the failed landing never completed";
  EXPECT_TRUE(sides.receiver.connected(sides.link.listener))
      << "the connection ended in the round of the failure, before UCX could report it";
  EXPECT_EQ(sides.receiver.stats().peers_lost, 0u);
  (void)sides.receiver.progress();
  EXPECT_FALSE(sides.receiver.connected(sides.link.listener))
      << "the connection outlived the round after the failure";
}

// The sending side's mirror. Where the peer reads the block itself (a rendezvous "get": CUDA IPC,
// RDMA), UCX fails a send under way as soon as this side sees the connection fail, while the
// peer's copy out of the block may still run and complete: the block is kept until the process
// exits. Over transports that only ever have this process touch it (tcp), it comes back at once.
std::optional<ucx::SendResult> fail_one_under_way(Sides& sides) {
  FailingSendsUnderWay failing(UCS_ERR_CONNECTION_RESET);
  std::vector<Tensor> received;
  auto result = send_one(sides, received);
  EXPECT_EQ(failing.failed(), 1u) << "the send was not made to fail under way";
  return result;
}

TEST(UcxFailedSend, ASendFailedUnderWayToAPeerThatMayReadTheBlockKeepsIt) {
  Sides sides;
  ASSERT_TRUE(sides.link.client) << to_string(sides.link.client.error());
  ReportedTransports reported({"tcp", "cuda_ipc", "cuda_copy"});
  const auto result = fail_one_under_way(sides);
  ASSERT_TRUE(result) << "the send never ended";
  EXPECT_FALSE(result->outcome) << "a send UCX failed was reported delivered";
  EXPECT_EQ(sides.client.stats().sends_kept, 1u);
  EXPECT_EQ(sides.sending->available_blocks(), 1u) << "the failed send's block came back";
}

TEST(UcxFailedSend, ASendFailedUnderWayOverTcpGivesTheBlockBack) {
  Sides sides;  // UCX's own answer: tcp on the loopback
  ASSERT_TRUE(sides.link.client) << to_string(sides.link.client.error());
  const auto result = fail_one_under_way(sides);
  ASSERT_TRUE(result) << "the send never ended";
  EXPECT_EQ(sides.client.stats().sends_kept, 0u);
  EXPECT_EQ(sides.sending->available_blocks(), 2u);
}

}  // namespace
}  // namespace holoscan::test
