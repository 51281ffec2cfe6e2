// Covers the release thread's options set from code: their ranges, the environment's precedence
// over them, and threads that set them at once. (ReleaseThreadDeathTest checks the exit drain's
// limit set from code, ReleasePolling the poll interval.)
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <string>
#include <thread>

#include "holoscan/deferred_release.hpp"
#include "stream/release_settings.hpp"
#include "support/gtest_printers.hpp"

namespace holoscan {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

constexpr const char* kPollVariable = "HOLOSCAN_DLPACK_RELEASE_POLL_US";
constexpr const char* kDrainVariable = "HOLOSCAN_DLPACK_EXIT_DRAIN_MS";
constexpr const char* kBacklogVariable = "HOLOSCAN_DLPACK_RELEASE_BACKLOG";

// Each test starts and ends with the defaults and no variable set.
class ReleaseOptions : public ::testing::Test {
 protected:
  void SetUp() override { restore(); }
  void TearDown() override { restore(); }

  static void restore() {
    unsetenv(kPollVariable);
    unsetenv(kDrainVariable);
    unsetenv(kBacklogVariable);
    ASSERT_TRUE(set_release_thread_options({}));
  }
};

ReleaseThreadOptions options(microseconds poll, milliseconds drain, std::size_t backlog = 4096) {
  ReleaseThreadOptions result;
  result.poll_interval = poll;
  result.exit_drain = drain;
  result.backlog_limit = backlog;
  return result;
}

TEST_F(ReleaseOptions, DefaultsAreFiftyMicrosecondsFiveSecondsAnd4096Releases) {
  const ReleaseThreadOptions in_effect = release_thread_options();
  EXPECT_EQ(in_effect.poll_interval, microseconds(50));
  EXPECT_EQ(in_effect.exit_drain, milliseconds(5000));
  EXPECT_EQ(in_effect.backlog_limit, 4096u);
  EXPECT_EQ(detail::backlog_limit_in_effect(), 4096u);
}

TEST_F(ReleaseOptions, OptionsSetFromCodeAreInEffect) {
  ASSERT_TRUE(set_release_thread_options(options(microseconds(1), milliseconds(0))));
  EXPECT_EQ(release_thread_options().poll_interval, microseconds(1));
  EXPECT_EQ(release_thread_options().exit_drain, milliseconds(0));
  ASSERT_TRUE(set_release_thread_options(options(std::chrono::seconds(1), std::chrono::hours(24))));
  EXPECT_EQ(release_thread_options().poll_interval, std::chrono::seconds(1));
  EXPECT_EQ(release_thread_options().exit_drain, std::chrono::hours(24));
  for (const std::size_t backlog : {std::size_t{0}, std::size_t{1}, std::size_t{100'000}}) {
    ASSERT_TRUE(set_release_thread_options(options(microseconds(9), milliseconds(9), backlog)));
    EXPECT_EQ(release_thread_options().backlog_limit, backlog);
    EXPECT_EQ(detail::backlog_limit_in_effect(), backlog);  // what the next drop uses
    EXPECT_EQ(release_thread_options().poll_interval, microseconds(9));
    EXPECT_EQ(release_thread_options().exit_drain, milliseconds(9));
  }
}

TEST_F(ReleaseOptions, OutOfRangeIsInvalidArgumentAndChangesNothing) {
  ASSERT_TRUE(set_release_thread_options(options(microseconds(70), milliseconds(700), 77)));
  const struct {
    ReleaseThreadOptions options;
    const char* message;
  } cases[] = {
      {options(microseconds(0), milliseconds(1)),
       "ReleaseThreadOptions::poll_interval must be 1 us to 1 s, not 0 us"},
      {options(microseconds(1'000'001), milliseconds(1)),
       "ReleaseThreadOptions::poll_interval must be 1 us to 1 s, not 1000001 us"},
      {options(microseconds(1), milliseconds(-1)),
       "ReleaseThreadOptions::exit_drain must be 0 ms to 24 h, not -1 ms"},
      {options(microseconds(1), milliseconds(86'400'001)),
       "ReleaseThreadOptions::exit_drain must be 0 ms to 24 h, not 86400001 ms"},
      {options(microseconds(1), milliseconds(1), 100'001),
       "ReleaseThreadOptions::backlog_limit must be 0 to 100000, not 100001"},
      {options(microseconds(1), milliseconds(1), static_cast<std::size_t>(-1)),
       "ReleaseThreadOptions::backlog_limit must be 0 to 100000, not 18446744073709551615"},
  };
  for (const auto& c : cases) {
    const auto result = set_release_thread_options(c.options);
    ASSERT_FALSE(result) << c.message;
    EXPECT_EQ(result.error().code, ErrorCode::kInvalidArgument);
    EXPECT_EQ(result.error().message, c.message);
    EXPECT_EQ(release_thread_options().poll_interval, microseconds(70));
    EXPECT_EQ(release_thread_options().exit_drain, milliseconds(700));
    EXPECT_EQ(release_thread_options().backlog_limit, 77u);
  }
}

TEST_F(ReleaseOptions, EnvironmentOverridesCodeWhereValid) {
  ASSERT_TRUE(set_release_thread_options(options(microseconds(70), milliseconds(700), 70)));
  setenv(kPollVariable, "300000", 1);
  setenv(kDrainVariable, "250", 1);
  setenv(kBacklogVariable, "0", 1);
  EXPECT_EQ(release_thread_options().poll_interval, microseconds(300'000));
  EXPECT_EQ(release_thread_options().exit_drain, milliseconds(250));
  EXPECT_EQ(release_thread_options().backlog_limit, 0u);
  EXPECT_EQ(detail::backlog_limit_in_effect(), 0u);
  // Setting from code again changes nothing while the environment says otherwise.
  ASSERT_TRUE(set_release_thread_options(options(microseconds(80), milliseconds(800), 80)));
  EXPECT_EQ(release_thread_options().poll_interval, microseconds(300'000));
  EXPECT_EQ(release_thread_options().exit_drain, milliseconds(250));
  EXPECT_EQ(release_thread_options().backlog_limit, 0u);

  // A value the environment cannot give (reported once on stderr) leaves code's in effect.
  setenv(kPollVariable, "fast", 1);
  setenv(kDrainVariable, "-1", 1);
  setenv(kBacklogVariable, "4k", 1);
  EXPECT_EQ(release_thread_options().poll_interval, microseconds(80));
  EXPECT_EQ(release_thread_options().exit_drain, milliseconds(800));
  EXPECT_EQ(release_thread_options().backlog_limit, 80u);
  // Past its maximum, the maximum.
  setenv(kBacklogVariable, "99999999999999999999", 1);
  EXPECT_EQ(release_thread_options().backlog_limit, 100'000u);
  unsetenv(kPollVariable);
  unsetenv(kDrainVariable);
  unsetenv(kBacklogVariable);
  EXPECT_EQ(release_thread_options().poll_interval, microseconds(80));
  EXPECT_EQ(release_thread_options().exit_drain, milliseconds(800));
  EXPECT_EQ(release_thread_options().backlog_limit, 80u);
}

// Two threads set options at once, round after round: once both have returned, the options are
// one thread's whole set, and the interval the release thread uses is theirs. Failed before (in
// about one round in a thousand): a set could take one thread's interval and the other's drain,
// and a slower refresh could put its interval in effect after the other's, for as long as
// nobody asked for the options again.
TEST_F(ReleaseOptions, ThreadsSettingAtOnceLeaveOneWholeSetInEffect) {
  constexpr int kRounds = 50000;
  const ReleaseThreadOptions sets[2] = {options(microseconds(10), milliseconds(100), 1000),
                                        options(microseconds(20), milliseconds(200), 2000)};
  std::atomic<int> arrived{0};
  const auto meet = [&](int meeting) {  // both threads, at each meeting in turn
    arrived.fetch_add(1);
    while (arrived.load() < 2 * meeting) {
      std::this_thread::yield();
    }
  };
  int mixed = 0;
  int stale = 0;
  // The meetings spin on sched_yield(): on a loaded machine (ctest -j on two cores) a yielding
  // thread can wait a scheduler slice or far longer for the other (EEVDF pushes a yielder's
  // deadline back at each yield), and 100000 meetings then outlast the test's timeout. The rounds
  // also stop after a time budget, decided by the first thread while the other waits at the next
  // meeting and read by both past it; unloaded, all of them run in well under a second.
  const auto budget_end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::atomic<bool> stop{false};
  const auto setter = [&](int id) {
    for (int round = 0; round < kRounds; ++round) {
      meet(2 * round + 1);
      if (stop.load()) {
        break;
      }
      (void)set_release_thread_options(sets[id]);
      meet(2 * round + 2);
      if (id == 0) {  // the other thread waits at the next meeting meanwhile
        const microseconds used = detail::poll_interval_in_effect();
        const ReleaseThreadOptions now = release_thread_options();
        const std::size_t limit_used = detail::backlog_limit_in_effect();
        const auto is = [&](const ReleaseThreadOptions& set) {
          return now.poll_interval == set.poll_interval && now.exit_drain == set.exit_drain &&
                 now.backlog_limit == set.backlog_limit;
        };
        mixed += is(sets[0]) || is(sets[1]) ? 0 : 1;
        stale += used == now.poll_interval && limit_used == now.backlog_limit ? 0 : 1;
        if (std::chrono::steady_clock::now() > budget_end) {
          stop.store(true);
        }
      }
    }
  };
  std::thread first(setter, 0);
  std::thread second(setter, 1);
  first.join();
  second.join();
  EXPECT_EQ(mixed, 0);
  EXPECT_EQ(stale, 0);
}

}  // namespace
}  // namespace holoscan
