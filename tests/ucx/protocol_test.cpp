// A peer that speaks the wire format by hand sends malformed tensor messages: each is refused
// with its code and a message naming the field, answered with that code, and the connection
// still carries the valid tensors sent after them.
#include <gtest/gtest.h>

#include <string>

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

}  // namespace
}  // namespace holoscan::test
