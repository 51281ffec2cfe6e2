// A receiver out of host memory while it takes a tensor in and hands it out (each allocation of
// its receive() made to fail in turn, support/allocation_hooks): whatever fails, a tensor handed
// out is whole (never an empty one confirmed to its sender), it is handed out at most once, and
// the sender learns what became of it.
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "support/allocation_hooks.hpp"
#include "ucx/failing_landing.hpp"
#include "ucx/series.hpp"
#include "ucx/ucx_test_support.hpp"

namespace holoscan::test {
namespace {

constexpr int kPatienceMs = 20000;

// Receives what comes (an exception out of a call is out of host memory: the next call goes on)
// until the sender's send ended, or `timeout_ms` passed.
void receive_until_told(ucx::Worker& receiver, SeriesSender& sender,
                        std::vector<ucx::Received>& received, int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (sender.delivered.size() + sender.failed.size() < sender.sent.size() &&
         std::chrono::steady_clock::now() < deadline) {
    if (auto got = receiver.receive(0); got && *got) {
      received.push_back(std::move(**got));
    }
    sender.drain();
  }
}

// One attempt on a fresh connection: tensor 0 sent, the receiver's allocation after the first
// `skip` of its receive() calls failing, and with `landing_fails` its landing ended by UCX with
// an error status; whether an allocation failed (false: `skip` is past them).
bool receive_with_failing_allocation(std::uint64_t skip, bool landing_fails) {
  LinkedWorkers sides;
  EXPECT_TRUE(sides.link.client);
  if (!sides.link.client) {
    return false;
  }
  ucx::Worker& receiver = sides.receiver;
  SeriesSender sender(sides.client, *sides.link.client, 2);
  std::optional<FailingLandings> landing;
  if (landing_fails) {
    landing.emplace(UCS_ERR_IO_ERROR);  // a transport's local failure; the connection stays up
  }
  EXPECT_TRUE(sender.send(0));
  std::vector<ucx::Received> received;
  received.reserve(4);  // no allocation of the test's own while allocations fail
  std::vector<Error> errors;
  errors.reserve(64);
  std::uint64_t failed = 0;
  {
    FailingAllocations failing(skip);
    // Three rounds more once the tensor is out: its Ack goes out in them, allocations failing.
    int after = 0;
    for (int i = 0; i < 50 && (received.empty() || after++ < 3); ++i) {
      try {
        if (auto got = receiver.receive(10); got && *got) {
          received.push_back(std::move(**got));
        } else if (!got && errors.size() < errors.capacity()) {
          errors.push_back(std::move(got.error()));
        }
      } catch (...) {
        ADD_FAILURE() << "an exception escaped the worker";
      }
      {
        const AllocationsNeverFail sender_side;  // only the receiver's allocations fail
        sender.drain();
      }
    }
    failed = failing.failed();
  }
  receive_until_told(receiver, sender, received, kPatienceMs);
  SCOPED_TRACE("allocation " + std::to_string(skip));
  EXPECT_LE(received.size(), 1u) << "a tensor handed out twice";
  for (const ucx::Received& tensor : received) {
    EXPECT_EQ(ucx_series::check(0, tensor.tensor), "") << "a tensor handed out broken";
  }
  EXPECT_EQ(sender.delivered.size() + sender.failed.size(), 1u) << "the sender never learned";
  if (!sender.delivered.empty()) {
    EXPECT_EQ(received.size(), 1u) << "confirmed, never handed out";
  }
  if (!landing_fails) {
    // UCX refused nothing: this side's own lack of memory is never blamed on a UCX call (the
    // Ack's encoding failing once read "ucp_am_send_nbx: Out of memory").
    for (const Error& error : errors) {
      EXPECT_EQ(error.message.find("ucp_"), std::string::npos) << error.message;
    }
  }
  if (landing_fails) {
    EXPECT_TRUE(received.empty()) << "a tensor that never landed was handed out";
    EXPECT_TRUE(sender.delivered.empty()) << "a tensor that never landed was confirmed";
  }
  return failed != 0;
}

TEST(UcxReceiveOutOfMemory, ATensorHandedOutIsWholeAndItsSenderLearns) {
  for_each_failing_allocation([](std::uint64_t skip) {
    return receive_with_failing_allocation(skip, /*landing_fails=*/false);
  });
}

// UCX ends the landing at once with an error status (eager data: no request): out of host memory
// for its refusal, the arrival was left landing with nothing to end it, so its sender never
// learned and a window of one stayed full.
TEST(UcxReceiveOutOfMemory, ALandingThatFailsAtOnceEndsItsSendWhateverAllocationFails) {
  for_each_failing_allocation([](std::uint64_t skip) {
    return receive_with_failing_allocation(skip, /*landing_fails=*/true);
  });
}

}  // namespace
}  // namespace holoscan::test
