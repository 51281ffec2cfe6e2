// A stream of tensors asks UCX for bandwidth: a send posted while UCX still moves an earlier one
// to the same peer, and a landing started while another lands, carry UCP_OP_ATTR_FLAG_MULTI_SEND
// (what ucx_perftest's bandwidth tests ask); a lone send and its landing never do, nor anything
// of workers whose stream_bandwidth_hint is off. Counted where UCX is called (failing_am_send.cpp,
// failing_landing.cpp).
#include <gtest/gtest.h>

#include <array>
#include <cstdint>

#include "ucx/failing_am_send.hpp"
#include "ucx/failing_landing.hpp"
#include "ucx/series.hpp"
#include "ucx/ucx_test_support.hpp"

namespace holoscan::test {
namespace {

constexpr int kPatienceMs = 20000;
// Tensors of the series that travel by rendezvous, so that UCX holds each until the receiver
// fetches it.
constexpr std::array<std::uint64_t, 4> kLarge{2, 7, 12, 17};

// What this process posted to UCX and started landing, between construction and now.
class Calls {
 public:
  Calls() : sent_(posted_tensor_messages()), landed_(started_landings()) {}
  /** @brief Tensor messages posted since construction, and those that asked for bandwidth. */
  PostedTensorMessages sent() const {
    const PostedTensorMessages now = posted_tensor_messages();
    return {now.all - sent_.all, now.bandwidth - sent_.bandwidth};
  }
  /** @brief Landings started since construction, and those that asked for bandwidth. */
  StartedLandings landed() const {
    const StartedLandings now = started_landings();
    return {now.all - landed_.all, now.bandwidth - landed_.bandwidth};
  }

 private:
  PostedTensorMessages sent_;
  StartedLandings landed_;
};

// Hands out everything the receiver gets until `count` came, then lets its Acks reach the sender.
void receive_all(ucx::Worker& receiver, SeriesSender& sender, std::size_t count) {
  std::size_t handed_out = 0;
  for (int i = 0; i < 2000 && handed_out < count; ++i) {
    auto got = receiver.receive(10);
    ASSERT_TRUE(got);
    handed_out += *got ? 1 : 0;
    sender.drain();
  }
  EXPECT_EQ(handed_out, count);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kPatienceMs);
  while (sender.delivered.size() < sender.sent.size() &&
         std::chrono::steady_clock::now() < deadline) {
    (void)receiver.progress();
    sender.drain();
  }
  EXPECT_EQ(sender.delivered.size(), sender.sent.size());
}

// The four large tensors posted before the receiver makes progress (UCX holds every one), their
// rendezvous starts all waiting at the receiver before it lands any, then all handed out.
void send_a_stream(ucx::Worker& receiver, ucx::Worker& client, ucx::PeerId peer) {
  SeriesSender sender(client, peer, kLarge.size());
  for (const std::uint64_t k : kLarge) {
    ASSERT_TRUE(sender.send(k));
  }
  for (int i = 0; i < 20; ++i) {
    (void)client.progress();  // every rendezvous start goes out; no data can move yet
  }
  receive_all(receiver, sender, kLarge.size());
}

TEST(UcxStreamHint, AStreamsLaterSendsAndLandingsAskForBandwidth) {
  LinkedWorkers sides;
  ASSERT_TRUE(sides.link.client);
  const Calls calls;
  send_a_stream(sides.receiver, sides.client, *sides.link.client);
  EXPECT_EQ(calls.sent().all, kLarge.size());
  EXPECT_EQ(calls.sent().bandwidth, kLarge.size() - 1) << "the first one had nothing beside it";
  EXPECT_EQ(calls.landed().all, kLarge.size());
  EXPECT_EQ(calls.landed().bandwidth, kLarge.size() - 1);
}

TEST(UcxStreamHint, ALoneSendAndItsLandingAskForLatency) {
  LinkedWorkers sides;
  ASSERT_TRUE(sides.link.client);
  const Calls calls;
  SeriesSender sender(sides.client, *sides.link.client, 1);
  for (const std::uint64_t k : kLarge) {  // one at a time: each delivered before the next
    ASSERT_TRUE(sender.send(k));
    receive_all(sides.receiver, sender, 1);
  }
  EXPECT_EQ(calls.sent().all, kLarge.size());
  EXPECT_EQ(calls.sent().bandwidth, 0u);
  EXPECT_EQ(calls.landed().all, kLarge.size());
  EXPECT_EQ(calls.landed().bandwidth, 0u);
}

TEST(UcxStreamHint, WorkersWithTheHintOffNeverAskForBandwidth) {
  ucx::WorkerConfig config;
  config.stream_bandwidth_hint = false;
  ucx::Worker receiver = make_worker(config);
  ucx::Worker client = make_worker(config);
  const InProcessLink link = connect_in_process(receiver, client);
  ASSERT_TRUE(link.client);
  const Calls calls;
  send_a_stream(receiver, client, *link.client);
  EXPECT_EQ(calls.sent().all, kLarge.size());
  EXPECT_EQ(calls.sent().bandwidth, 0u);
  EXPECT_EQ(calls.landed().all, kLarge.size());
  EXPECT_EQ(calls.landed().bandwidth, 0u);
}

}  // namespace
}  // namespace holoscan::test
