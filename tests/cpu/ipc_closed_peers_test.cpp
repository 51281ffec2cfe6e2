// Covers the set of hung-up peer ids that the export ledger keeps: membership and how ranges merge.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

#include "ipc/export/closed_peers.hpp"

namespace holoscan::ipc::detail {
namespace {

TEST(IpcClosedPeers, IdsInAnyOrderMergeIntoRanges) {
  ClosedPeers closed;
  EXPECT_FALSE(closed.contains(0));
  for (std::uint64_t id : {5u, 7u, 3u}) {
    closed.insert(id);
  }
  EXPECT_EQ(closed.ranges(), 3u);
  EXPECT_TRUE(closed.contains(3));
  EXPECT_FALSE(closed.contains(4));
  EXPECT_FALSE(closed.contains(6));
  closed.insert(6);  // joins 5 and 7
  EXPECT_EQ(closed.ranges(), 2u);
  closed.insert(4);  // joins 3 and 5..7
  EXPECT_EQ(closed.ranges(), 1u);
  closed.insert(2);  // extends the range downwards
  closed.insert(8);  // and upwards
  closed.insert(5);  // already there
  EXPECT_EQ(closed.ranges(), 1u);
  for (std::uint64_t id = 2; id <= 8; ++id) {
    EXPECT_TRUE(closed.contains(id)) << id;
  }
  EXPECT_FALSE(closed.contains(1));
  EXPECT_FALSE(closed.contains(9));
}

TEST(IpcClosedPeers, SequentialIdsCostOneRange) {
  ClosedPeers closed;
  for (std::uint64_t id = 1; id <= 10'000; ++id) {
    closed.insert(id % 2 == 0 ? id - 1 : id + 1);  // pairs closed out of order
  }
  EXPECT_EQ(closed.ranges(), 1u);
  EXPECT_TRUE(closed.contains(10'000));
  EXPECT_FALSE(closed.contains(10'001));
}

TEST(IpcClosedPeers, TheEndsOfTheIdSpace) {
  constexpr std::uint64_t kLast = std::numeric_limits<std::uint64_t>::max();
  ClosedPeers closed;
  closed.insert(kLast);
  closed.insert(0);
  EXPECT_TRUE(closed.contains(kLast));
  EXPECT_TRUE(closed.contains(0));
  EXPECT_FALSE(closed.contains(kLast - 1));
  EXPECT_FALSE(closed.contains(1));
  closed.insert(kLast - 1);
  closed.insert(1);
  EXPECT_EQ(closed.ranges(), 2u);
  EXPECT_TRUE(closed.contains(kLast - 1));
}

}  // namespace
}  // namespace holoscan::ipc::detail
