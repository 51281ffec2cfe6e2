// The wake signal's bookkeeping, one call at a time as the worker's mutex orders them: a thread
// that went to sleep is never left asleep beside progress made after it did.
#include <poll.h>

#include <gtest/gtest.h>

#include "ucx/wake_signal.hpp"

namespace holoscan::ucx {
namespace {

// Whether a thread sleeping on the signal now would wake at once.
bool readable(const detail::WakeSignal& signal) {
  pollfd entry{signal.fd(), POLLIN, 0};
  return poll(&entry, 1, 0) == 1 && (entry.revents & POLLIN) != 0;
}

TEST(UcxWakeSignal, ASleeperAfterAPostIsWokenByTheNextPost) {
  detail::WakeSignal signal;
  ASSERT_GE(signal.fd(), 0);
  const auto first = signal.enter_sleep();
  signal.post();                             // wakes the first sleeper
  const auto second = signal.enter_sleep();  // goes to sleep before the first is back
  signal.post();                             // progress the second sleeps for
  signal.leave_sleep(first);
  EXPECT_TRUE(readable(signal)) << "the second sleeper is left asleep beside its progress";
  signal.leave_sleep(second);
  EXPECT_FALSE(readable(signal));
}

TEST(UcxWakeSignal, OnlyThoseAsleepAtAPostKeepItReadable) {
  detail::WakeSignal signal;
  ASSERT_GE(signal.fd(), 0);
  const auto first = signal.enter_sleep();
  signal.post();
  const auto later = signal.enter_sleep();  // no post since: not waited for
  signal.leave_sleep(later);
  EXPECT_TRUE(readable(signal));
  signal.leave_sleep(first);
  EXPECT_FALSE(readable(signal));
}

}  // namespace
}  // namespace holoscan::ucx
