#include "release_settings.hpp"

#include <cstdio>
#include <cstdlib>

namespace holoscan::detail {
namespace {

// A day: far beyond any sensible wait at exit, and far from overflowing a deadline of
// steady_clock (nanoseconds in 64 bits: about 292 years).
constexpr SettingRange kExitDrain{"HOLOSCAN_DLPACK_EXIT_DRAIN_MS", "ms", 0, 86'400'000};
constexpr std::int64_t kDefaultExitDrainMs = 5000;

// A poll at least every second; at most a million a second.
constexpr SettingRange kPollInterval{"HOLOSCAN_DLPACK_RELEASE_POLL_US", "us", 1, 1'000'000};
constexpr std::int64_t kDefaultPollUs = 50;

// One message per variable and process: a setting read at every exit or thread start would
// otherwise repeat it.
std::atomic<bool> exit_drain_reported{false};
std::atomic<bool> poll_interval_reported{false};

void report(std::atomic<bool>& reported, const SettingRange& range, const char* text,
            const char* problem, std::int64_t used) {
  if (!reported.exchange(true)) {
    std::fprintf(stderr, "holoscan-dlpack: %s=\"%s\" %s; %lld %s applies\n", range.variable, text,
                 problem, static_cast<long long>(used), range.unit);
  }
}

}  // namespace

std::int64_t setting_or(const char* text, const SettingRange& range, std::int64_t fallback,
                        std::atomic<bool>& reported) noexcept {
  if (text == nullptr || *text == '\0') {
    return fallback;
  }
  // Saturating: past the maximum the digits only need checking, never accumulating.
  std::int64_t value = 0;
  for (const char* c = text; *c != '\0'; ++c) {
    if (*c < '0' || *c > '9') {
      report(reported, range, text, "is not a whole number", fallback);
      return fallback;
    }
    if (value <= range.max) {
      value = value * 10 + (*c - '0');
    }
  }
  if (value > range.max) {
    report(reported, range, text, "is above the maximum", range.max);
    return range.max;
  }
  if (value < range.min) {
    report(reported, range, text, "is below the minimum", range.min);
    return range.min;
  }
  return value;
}

std::chrono::milliseconds exit_drain_setting() noexcept {
  return std::chrono::milliseconds(setting_or(std::getenv(kExitDrain.variable), kExitDrain,
                                              kDefaultExitDrainMs, exit_drain_reported));
}

std::chrono::microseconds poll_interval_setting() noexcept {
  return std::chrono::microseconds(setting_or(std::getenv(kPollInterval.variable), kPollInterval,
                                              kDefaultPollUs, poll_interval_reported));
}

}  // namespace holoscan::detail
