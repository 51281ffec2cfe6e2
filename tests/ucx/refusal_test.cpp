// A refusal that cannot reach its sender: the receiver refuses a tensor (over max_receive_bytes)
// and the Ack that says so cannot go out, because UCX refuses it (failing_am_send) or the host is
// out of memory on the way (each allocation of the receiver's round made to fail in turn,
// support/allocation_hooks). Whatever fails, the sender learns: the refusal, or kClosed for the
// connection the receiver ended instead; and every error receive() reports says what happened.
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <ucs/type/status.h>

#include "support/allocation_hooks.hpp"
#include "ucx/failing_am_send.hpp"
#include "ucx/series.hpp"
#include "ucx/ucx_test_support.hpp"

namespace holoscan::test {
namespace {

constexpr int kPatienceMs = 20000;
constexpr std::uint64_t kRefusedTensor = 2;  // rendezvous-sized: over the receiver's limit

// A receiver that refuses every payload over 64 bytes, and a sender connected to it.
struct Refusing {
  ucx::Worker receiver = make_worker(limited());
  ucx::Worker client = make_worker();
  InProcessLink link = connect_in_process(receiver, client);

  static ucx::WorkerConfig limited() {
    ucx::WorkerConfig config;
    config.max_receive_bytes = 64;
    return config;
  }
};

// What receive() reports now, in order (a refused tensor is never handed out).
std::vector<Error> errors_reported(ucx::Worker& receiver) {
  std::vector<Error> errors;
  for (;;) {
    auto received = receiver.receive(0);
    if (received && !*received) {
      return errors;
    }
    EXPECT_FALSE(received) << "a refused tensor was handed out";
    if (!received) {
      errors.push_back(received.error());
    }
  }
}

// Progresses both sides (the receiver's rounds close what it ends) until the sender's sends all
// ended or `timeout_ms` passed; whether they did.
bool finish_both(ucx::Worker& receiver, SeriesSender& sender, int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (sender.delivered.size() + sender.failed.size() < sender.sent.size() &&
         std::chrono::steady_clock::now() < deadline) {
    (void)receiver.progress();
    sender.drain();
  }
  return sender.delivered.size() + sender.failed.size() == sender.sent.size();
}

TEST(UcxRefusal, ARefusalUcxCannotSendEndsTheConnectionAndTheSenderLearnsClosed) {
  Refusing sides;
  ASSERT_TRUE(sides.link.client) << to_string(sides.link.client.error());
  SeriesSender sender(sides.client, *sides.link.client, 2);
  ASSERT_TRUE(sender.send(kRefusedTensor));
  std::optional<expected<std::optional<ucx::Received>, Error>> refused;
  {
    FailingAmSends failing(ucx::MessageId::kAck, UCS_ERR_IO_ERROR);
    for (int i = 0; i < 1000 && !refused; ++i) {
      if (auto received = sides.receiver.receive(10); !received || *received) {
        refused = std::move(received);
      }
      sender.drain();
    }
    ASSERT_EQ(failing.failed(), 1u) << "the refusal's Ack was not sent";
  }
  ASSERT_TRUE(refused && !*refused);
  EXPECT_EQ(refused->error().code, ErrorCode::kResourceExhausted) << refused->error().message;
  EXPECT_NE(refused->error().message.find("tensor 1"), std::string::npos)
      << refused->error().message;

  ASSERT_TRUE(finish_both(sides.receiver, sender, kPatienceMs))
      << "the sender never learned what became of its tensor";
  const auto errors = errors_reported(sides.receiver);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].code, ErrorCode::kClosed) << errors[0].message;
  // What failed, the UCX call that said so, and its status by text, name and number.
  EXPECT_NE(errors[0].message.find("an answer to it could not be sent (ucp_am_send_nbx: " +
                                   std::string(ucs_status_string(UCS_ERR_IO_ERROR)) +
                                   ", UCS_ERR_IO_ERROR (-3))"),
            std::string::npos)
      << errors[0].message;
  EXPECT_FALSE(sides.receiver.connected(sides.link.listener));
  ASSERT_EQ(sender.failed.size(), 1u);
  EXPECT_EQ(sender.failed[0].second.code, ErrorCode::kClosed) << sender.failed[0].second.message;
  EXPECT_EQ(sender.pool->available_blocks(), 2u);
}

// A tensor that landed before the connection was ended here (its refusal's Ack could not go out)
// is not handed out: its sender is told kClosed for it, as for every send in flight.
TEST(UcxRefusal, AConnectionEndedHereHandsOutNothingItsSenderIsToldFailed) {
  constexpr std::uint64_t kSmallTensor = 4;  // 8 bytes: lands under the receiver's limit
  Refusing sides;
  ASSERT_TRUE(sides.link.client) << to_string(sides.link.client.error());
  SeriesSender sender(sides.client, *sides.link.client, 2);
  ASSERT_TRUE(sender.send(kSmallTensor));
  ASSERT_TRUE(sender.send(kRefusedTensor));
  {
    FailingAmSends failing(ucx::MessageId::kAck, UCS_ERR_IO_ERROR);
    for (int i = 0; i < 1000 && failing.failed() == 0; ++i) {
      (void)sides.receiver.progress();  // lands and refuses without handing anything out
      sender.drain();
    }
    ASSERT_EQ(failing.failed(), 1u) << "the refusal's Ack was not sent";
  }
  ASSERT_TRUE(finish_both(sides.receiver, sender, kPatienceMs))
      << "the sender never learned what became of its tensors";
  const auto errors = errors_reported(sides.receiver);  // fails on a tensor handed out
  ASSERT_FALSE(errors.empty());
  EXPECT_EQ(errors.back().code, ErrorCode::kClosed) << errors.back().message;
  EXPECT_TRUE(sender.delivered.empty());
  ASSERT_EQ(sender.failed.size(), 2u);
  for (const auto& [sequence, error] : sender.failed) {
    EXPECT_TRUE(error.code == ErrorCode::kClosed || error.code == ErrorCode::kResourceExhausted)
        << "tensor " << sequence << ": " << error.message;
  }
  EXPECT_EQ(sender.pool->available_blocks(), 2u);
}

// The receiver's rounds with the allocation after the first `skip` failing (an exception out of
// a round is out of host memory in a step of its own: the next round goes on); how many failed.
std::uint64_t progress_failing(ucx::Worker& receiver, std::uint64_t skip) {
  FailingAllocations failing(skip);
  for (int i = 0; i < 20; ++i) {
    try {
      (void)receiver.progress();
    } catch (...) {
    }
  }
  return failing.failed();
}

// What both sides must end up with: every error with its text; the sender's send refused with
// the receiver's refusal, which receive() reported too, or kClosed, after receive()'s kClosed.
// Where UCX refused nothing (`ucx_refused` false), no message blames a UCX call for this side's
// own lack of memory.
void check_told(const std::vector<Error>& errors, SeriesSender& sender, std::uint64_t skip,
                bool ucx_refused) {
  SCOPED_TRACE("allocation " + std::to_string(skip));
  bool refused_here = false;
  for (const Error& error : errors) {
    EXPECT_FALSE(error.message.empty()) << "an error without text";
    if (!ucx_refused) {
      EXPECT_EQ(error.message.find("ucp_"), std::string::npos) << error.message;
    }
    refused_here = refused_here || error.code == ErrorCode::kResourceExhausted;
  }
  ASSERT_EQ(sender.failed.size(), 1u) << "the send was not reported failed";
  const Error& outcome = sender.failed[0].second;
  if (outcome.code == ErrorCode::kResourceExhausted) {
    EXPECT_TRUE(refused_here) << "refused there, not here";
  } else {
    EXPECT_EQ(outcome.code, ErrorCode::kClosed) << outcome.message;
    EXPECT_TRUE(!errors.empty() && errors.back().code == ErrorCode::kClosed)
        << "the connection ended without kClosed";
  }
  EXPECT_EQ(sender.pool->available_blocks(), 2u);
}

// One attempt on a fresh connection, the refusal's Ack also refused by UCX when `unsendable`;
// whether an allocation failed (false: `skip` is past them).
bool refuse_with_failing_allocation(std::uint64_t skip, bool unsendable = false) {
  Refusing sides;
  EXPECT_TRUE(sides.link.client);
  if (!sides.link.client) {
    return false;
  }
  SeriesSender sender(sides.client, *sides.link.client, 2);
  EXPECT_TRUE(sender.send(kRefusedTensor));
  for (int i = 0; i < 20; ++i) {
    sender.drain();  // the tensor's header waits in the receiver's socket
  }
  std::optional<FailingAmSends> refused_by_ucx;
  if (unsendable) {
    refused_by_ucx.emplace(ucx::MessageId::kAck, UCS_ERR_IO_ERROR);
  }
  const std::uint64_t failed = progress_failing(sides.receiver, skip);
  refused_by_ucx.reset();
  EXPECT_TRUE(finish_both(sides.receiver, sender, kPatienceMs))
      << "the sender never learned (allocation " << skip << ")";
  check_told(errors_reported(sides.receiver), sender, skip, unsendable);
  return failed != 0;
}

TEST(UcxRefusal, OutOfMemoryWhileRefusingStillTellsTheSender) {
  std::uint64_t skip = 0;
  while (refuse_with_failing_allocation(skip) && skip < 200) {
    ++skip;
  }
  EXPECT_GT(skip, 0u) << "no allocation of the refusal failed: the test saw nothing";
  EXPECT_LT(skip, 200u);
}

// The refusal's Ack cannot go out (UCX refuses it), and the host runs out of memory while the
// connection is ended for that.
TEST(UcxRefusal, OutOfMemoryWhileEndingTheConnectionStillTellsTheSender) {
  for_each_failing_allocation(
      [](std::uint64_t skip) { return refuse_with_failing_allocation(skip, /*unsendable=*/true); });
}

}  // namespace
}  // namespace holoscan::test
