// The window: with `window` tensors in flight to a peer that holds them, send() says
// kBackpressured at once, and the window never grows; once the peer takes them, sending resumes.
// The receiver's bound: a peer that ignores its window has the tensors past
// max_waiting_per_peer refused with kBackpressured, as many refusals as that are kept for
// receive() to report (the others are answered only), and the connection stays usable.
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "ucx/series.hpp"
#include "ucx/ucx_test_support.hpp"

namespace holoscan::test {
namespace {

TEST(UcxBackpressure, AFullWindowRefusesAtOnceUntilThePeerTakesTensors) {
  constexpr std::size_t kWindow = 4;
  int go[2];
  ASSERT_EQ(::pipe(go), 0);
  auto [worker, receiver, peer] =
      connect_receiver(kWindow, {"count=14", "go_fd=" + std::to_string(go[0])}, {go[0]});
  ::close(go[0]);
  ASSERT_NE(peer, 0u);
  SeriesSender sender(worker, peer, 16);
  for (std::uint64_t k = 0; k < kWindow; ++k) {
    ASSERT_TRUE(sender.send(k));
  }
  auto extra = sender.pool->allocate({8}, DLDataType{kDLFloat, 32, 1});
  ASSERT_TRUE(extra);
  const auto started = std::chrono::steady_clock::now();
  auto refused = worker.send(peer, *extra);
  const auto took = std::chrono::steady_clock::now() - started;
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kBackpressured);
  EXPECT_NE(refused.error().message.find("window"), std::string::npos);
  // A send that waited for the window would wait for good (the receiver holds everything back):
  // a second separates that from a call descheduled on a loaded machine.
  EXPECT_LT(took, std::chrono::seconds(1)) << "send() waited";
  // The receiver holds everything back: nothing ends, the window stays full.
  const auto hold_until = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  while (std::chrono::steady_clock::now() < hold_until) {
    sender.drain();
  }
  EXPECT_TRUE(sender.delivered.empty() && sender.failed.empty());
  EXPECT_EQ(worker.in_flight(peer), kWindow);
  extra = {};
  ASSERT_EQ(::write(go[1], "g", 1), 1);
  for (std::uint64_t k = kWindow; k < 14; ++k) {
    ASSERT_TRUE(sender.send(k));
  }
  ASSERT_TRUE(sender.finish(20000));
  EXPECT_EQ(sender.delivered.size(), 14u);
  EXPECT_LE(sender.most_in_flight, kWindow);
  EXPECT_EQ(wait_peer(receiver, 20000, &worker), 0);
  ::close(go[1]);
}

TEST(UcxBackpressure, APeerIgnoringItsWindowHasTheTensorsPastTheReceiversBoundRefused) {
  constexpr std::uint64_t kCount = 8;
  constexpr std::uint64_t kAllowed = 3;
  constexpr std::uint64_t kReported = 2 * kAllowed;  // the refusals kept: as many as the bound
  ucx::WorkerConfig config;
  config.max_waiting_per_peer = kAllowed;
  auto worker = make_worker(config);
  const pid_t raw =
      start_peer({"flood", "port=" + listen_on_loopback(worker), "count=" + std::to_string(kCount),
                  "allowed=" + std::to_string(kAllowed)});
  // Nothing is handed out until every tensor of the flood came: the first kAllowed wait, landed,
  // and each one after them is refused (answered, and the first kAllowed refusals kept).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (worker.stats().refused < kCount - kAllowed &&
         std::chrono::steady_clock::now() < deadline) {
    ASSERT_TRUE(worker.progress());
  }
  ASSERT_EQ(worker.stats().refused, kCount - kAllowed)
      << "the flood was not refused past the bound";
  for (std::uint64_t sequence = 1; sequence <= kCount + 1; ++sequence) {
    if (sequence > kReported && sequence <= kCount) {
      continue;  // answered to the peer, not kept for receive()
    }
    SCOPED_TRACE(sequence);
    auto received = worker.receive(20000);
    if (sequence <= kAllowed || sequence == kCount + 1) {
      ASSERT_TRUE(received && *received)
          << (received ? "nothing came" : to_string(received.error()));
      EXPECT_EQ((*received)->sequence, sequence);
      EXPECT_EQ(ucx_series::check(0, (*received)->tensor), "");
      continue;
    }
    ASSERT_FALSE(received) << "accepted past the bound";
    EXPECT_EQ(received.error().code, ErrorCode::kBackpressured);
    const std::string expected_text = "already has " + std::to_string(kAllowed) +
                                      " tensors waiting to be received "
                                      "(WorkerConfig::max_waiting_per_peer); tensor " +
                                      std::to_string(sequence) + " refused";
    EXPECT_NE(received.error().message.find(expected_text), std::string::npos)
        << received.error().message;
  }
  EXPECT_EQ(wait_peer(raw, 20000, &worker), 0) << "an answer was missing or had the wrong code";
  EXPECT_EQ(worker.stats().received, kAllowed + 1);
  EXPECT_EQ(worker.stats().refused, kCount - kAllowed);
  // A refusal kept past the bound would have come before tensor kCount + 1 (arrival order).
  auto gone = worker.receive(20000);
  ASSERT_FALSE(gone && *gone) << "more came";
  ASSERT_FALSE(gone);
  EXPECT_EQ(gone.error().code, ErrorCode::kClosed) << gone.error().message;
}

// Tensors accepted, then refused as they land (past max_receive_bytes): no more of their
// refusals are kept for receive() than the bound, the rest are answered only.
TEST(UcxBackpressure, TensorsRefusedAtTheirLandingKeepNoMoreRefusalsThanTheBound) {
  constexpr std::uint64_t kCount = 7;
  constexpr std::uint64_t kKept = 2;
  ucx::WorkerConfig config;
  config.max_receive_bytes = 64;  // tensor 0 of the series has 68 bytes
  config.max_waiting_per_peer = kKept;
  auto worker = make_worker(config);
  const pid_t raw =
      start_peer({"flood", "port=" + listen_on_loopback(worker), "count=" + std::to_string(kCount),
                  "allowed=0", "paced=1", "extra=0",
                  "code=" + std::to_string(static_cast<int>(ErrorCode::kResourceExhausted))});
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (worker.stats().refused < kCount && std::chrono::steady_clock::now() < deadline) {
    ASSERT_TRUE(worker.progress());
  }
  ASSERT_EQ(worker.stats().refused, kCount);
  EXPECT_EQ(wait_peer(raw, 20000, &worker), 0) << "an answer was missing or had the wrong code";
  for (std::uint64_t sequence = 1; sequence <= kKept; ++sequence) {
    auto refused = worker.receive(20000);
    ASSERT_FALSE(refused && *refused) << "tensor " << sequence << " was accepted";
    ASSERT_FALSE(refused) << "nothing came for tensor " << sequence;
    EXPECT_EQ(refused.error().code, ErrorCode::kResourceExhausted) << refused.error().message;
  }
  auto gone = worker.receive(20000);
  ASSERT_FALSE(gone && *gone);
  ASSERT_FALSE(gone) << "nothing came";
  EXPECT_EQ(gone.error().code, ErrorCode::kClosed)
      << "a refusal past the bound was kept: " << gone.error().message;
}

TEST(UcxBackpressure, AReceiversBoundOfNoTensorsIsRefused) {
  ucx::WorkerConfig config;
  config.max_waiting_per_peer = 0;
  auto worker = ucx::Worker::create(config);
  ASSERT_FALSE(worker);
  EXPECT_EQ(worker.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(worker.error().message, "ucx worker: max_waiting_per_peer must be at least 1");
}

}  // namespace
}  // namespace holoscan::test
