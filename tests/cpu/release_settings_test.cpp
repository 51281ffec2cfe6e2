// Covers how the release thread's environment settings are read: whole numbers only, clamped to a
// range no deadline can overflow, and one message on stderr when a value is not used as written.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "stream/release_settings.hpp"

namespace holoscan {
namespace {

using detail::setting_or;

constexpr detail::SettingRange kRange{"HOLOSCAN_DLPACK_TEST_SETTING", "ms", 1, 1000};
constexpr std::int64_t kFallback = 50;

// The value read from `text` and what it printed, with a fresh "reported" flag.
std::pair<std::int64_t, std::string> read(const char* text) {
  std::atomic<bool> reported{false};
  ::testing::internal::CaptureStderr();
  const std::int64_t value = setting_or(text, kRange, kFallback, reported);
  return {value, ::testing::internal::GetCapturedStderr()};
}

TEST(ReleaseSettings, UnsetOrEmptyGivesTheFallbackSilently) {
  EXPECT_EQ(read(nullptr), std::make_pair(kFallback, std::string()));
  EXPECT_EQ(read(""), std::make_pair(kFallback, std::string()));
}

TEST(ReleaseSettings, WholeNumbersInRangeAreTakenAsWritten) {
  EXPECT_EQ(read("1"), std::make_pair(std::int64_t{1}, std::string()));
  EXPECT_EQ(read("0200"), std::make_pair(std::int64_t{200}, std::string()));
  EXPECT_EQ(read("1000"), std::make_pair(std::int64_t{1000}, std::string()));
}

TEST(ReleaseSettings, NonsenseIsRejectedWithOneLine) {
  for (const char* text : {"1e13", "-5", "+5", " 5", "5ms", "abc", "2.5"}) {
    const auto [value, printed] = read(text);
    EXPECT_EQ(value, kFallback) << text;
    EXPECT_EQ(printed, "holoscan-dlpack: HOLOSCAN_DLPACK_TEST_SETTING=\"" + std::string(text) +
                           "\" is not a whole number; 50 ms applies\n");
  }
}

TEST(ReleaseSettings, OutOfRangeIsClampedWithOneLine) {
  // Numbers past int64 too: 10^13 ms overflowed the exit drain's deadline before.
  for (const char* text : {"1001", "10000000000000", "99999999999999999999999999"}) {
    const auto [value, printed] = read(text);
    EXPECT_EQ(value, kRange.max) << text;
    EXPECT_EQ(printed, "holoscan-dlpack: HOLOSCAN_DLPACK_TEST_SETTING=\"" + std::string(text) +
                           "\" is above the maximum; 1000 ms applies\n");
  }
  const auto [value, printed] = read("0");
  EXPECT_EQ(value, kRange.min);
  EXPECT_EQ(printed,
            "holoscan-dlpack: HOLOSCAN_DLPACK_TEST_SETTING=\"0\" is below the minimum; 1 ms "
            "applies\n");
}

TEST(ReleaseSettings, TheMessageIsPrintedOnce) {
  std::atomic<bool> reported{false};
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(setting_or("x", kRange, kFallback, reported), kFallback);
  EXPECT_EQ(setting_or("x", kRange, kFallback, reported), kFallback);
  EXPECT_EQ(setting_or("5000", kRange, kFallback, reported), kRange.max);
  const std::string printed = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(printed,
            "holoscan-dlpack: HOLOSCAN_DLPACK_TEST_SETTING=\"x\" is not a whole number; "
            "50 ms applies\n");
  EXPECT_TRUE(reported.load());
}

}  // namespace
}  // namespace holoscan
