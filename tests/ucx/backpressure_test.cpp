// The window: with `window` tensors in flight to a peer that holds them, send() says
// kBackpressured at once, and the window never grows; once the peer takes them, sending resumes.
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <string>

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

}  // namespace
}  // namespace holoscan::test
