// Covers the release thread's options set from code: their ranges, and the environment's
// precedence over them. (ReleaseThreadDeathTest checks the exit drain's limit set from code,
// ReleasePolling the poll interval.)
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <string>

#include "holoscan/deferred_release.hpp"
#include "support/gtest_printers.hpp"

namespace holoscan {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

constexpr const char* kPollVariable = "HOLOSCAN_DLPACK_RELEASE_POLL_US";
constexpr const char* kDrainVariable = "HOLOSCAN_DLPACK_EXIT_DRAIN_MS";

// Each test starts and ends with the defaults and no variable set.
class ReleaseOptions : public ::testing::Test {
 protected:
  void SetUp() override { restore(); }
  void TearDown() override { restore(); }

  static void restore() {
    unsetenv(kPollVariable);
    unsetenv(kDrainVariable);
    ASSERT_TRUE(set_release_thread_options({}));
  }
};

ReleaseThreadOptions options(microseconds poll, milliseconds drain) {
  ReleaseThreadOptions result;
  result.poll_interval = poll;
  result.exit_drain = drain;
  return result;
}

TEST_F(ReleaseOptions, DefaultsAreFiftyMicrosecondsAndFiveSeconds) {
  const ReleaseThreadOptions in_effect = release_thread_options();
  EXPECT_EQ(in_effect.poll_interval, microseconds(50));
  EXPECT_EQ(in_effect.exit_drain, milliseconds(5000));
}

TEST_F(ReleaseOptions, OptionsSetFromCodeAreInEffect) {
  ASSERT_TRUE(set_release_thread_options(options(microseconds(1), milliseconds(0))));
  EXPECT_EQ(release_thread_options().poll_interval, microseconds(1));
  EXPECT_EQ(release_thread_options().exit_drain, milliseconds(0));
  ASSERT_TRUE(set_release_thread_options(options(std::chrono::seconds(1), std::chrono::hours(24))));
  EXPECT_EQ(release_thread_options().poll_interval, std::chrono::seconds(1));
  EXPECT_EQ(release_thread_options().exit_drain, std::chrono::hours(24));
}

TEST_F(ReleaseOptions, OutOfRangeIsInvalidArgumentAndChangesNothing) {
  ASSERT_TRUE(set_release_thread_options(options(microseconds(70), milliseconds(700))));
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
  };
  for (const auto& c : cases) {
    const auto result = set_release_thread_options(c.options);
    ASSERT_FALSE(result) << c.message;
    EXPECT_EQ(result.error().code, ErrorCode::kInvalidArgument);
    EXPECT_EQ(result.error().message, c.message);
    EXPECT_EQ(release_thread_options().poll_interval, microseconds(70));
    EXPECT_EQ(release_thread_options().exit_drain, milliseconds(700));
  }
}

TEST_F(ReleaseOptions, EnvironmentOverridesCodeWhereValid) {
  ASSERT_TRUE(set_release_thread_options(options(microseconds(70), milliseconds(700))));
  setenv(kPollVariable, "300000", 1);
  setenv(kDrainVariable, "250", 1);
  EXPECT_EQ(release_thread_options().poll_interval, microseconds(300'000));
  EXPECT_EQ(release_thread_options().exit_drain, milliseconds(250));
  // Setting from code again changes nothing while the environment says otherwise.
  ASSERT_TRUE(set_release_thread_options(options(microseconds(80), milliseconds(800))));
  EXPECT_EQ(release_thread_options().poll_interval, microseconds(300'000));
  EXPECT_EQ(release_thread_options().exit_drain, milliseconds(250));

  // A value the environment cannot give (reported once on stderr) leaves code's in effect.
  setenv(kPollVariable, "fast", 1);
  setenv(kDrainVariable, "-1", 1);
  EXPECT_EQ(release_thread_options().poll_interval, microseconds(80));
  EXPECT_EQ(release_thread_options().exit_drain, milliseconds(800));
  unsetenv(kPollVariable);
  unsetenv(kDrainVariable);
  EXPECT_EQ(release_thread_options().poll_interval, microseconds(80));
  EXPECT_EQ(release_thread_options().exit_drain, milliseconds(800));
}

}  // namespace
}  // namespace holoscan
