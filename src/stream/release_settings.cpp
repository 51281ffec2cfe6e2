#include "stream/release_settings.hpp"

#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>
#include <utility>

#include "dlpack/without_throwing.hpp"
#include "holoscan/deferred_release.hpp"
#include "stream/release_queue.hpp"

namespace holoscan::detail {
namespace {

// A day: far beyond any sensible wait at exit, and far from overflowing a deadline of
// steady_clock (nanoseconds in 64 bits: about 292 years).
constexpr SettingRange kExitDrain{"HOLOSCAN_DLPACK_EXIT_DRAIN_MS", "ms", 0, 86'400'000};
constexpr std::int64_t kDefaultExitDrainMs = 5000;

// A poll at least every second; at most a million a second.
constexpr SettingRange kPollInterval{"HOLOSCAN_DLPACK_RELEASE_POLL_US", "us", 1, 1'000'000};
constexpr std::int64_t kDefaultPollUs = 50;

// Set from code (set_release_thread_options), for when the environment says nothing: both in one
// word (the ranges fit 32 bits each), so that threads setting options at once leave one's whole
// set, never one's interval with another's drain.
constexpr std::uint64_t code_options_of(std::int64_t poll_us, std::int64_t exit_drain_ms) {
  return static_cast<std::uint64_t>(exit_drain_ms) << 32 | static_cast<std::uint64_t>(poll_us);
}
std::int64_t poll_us_of(std::uint64_t code) {
  return static_cast<std::int64_t>(code & 0xffffffffu);
}
std::int64_t exit_drain_ms_of(std::uint64_t code) { return static_cast<std::int64_t>(code >> 32); }
static_assert(kPollInterval.max < (std::int64_t{1} << 32) &&
                  kExitDrain.max < (std::int64_t{1} << 32),
              "each setting fits its half of the word");
std::atomic<std::uint64_t> code_options{code_options_of(kDefaultPollUs, kDefaultExitDrainMs)};
// What the release thread uses; 0 until first read.
std::atomic<std::int64_t> poll_us_in_effect{0};

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

namespace {

std::chrono::milliseconds exit_drain_of(std::uint64_t code) noexcept {
  return std::chrono::milliseconds(setting_or(std::getenv(kExitDrain.variable), kExitDrain,
                                              exit_drain_ms_of(code), exit_drain_reported));
}

// Stores the interval of the options set and returns it with the options it came from. Another
// thread may set options between this read of them and the store, and store its interval first:
// the store is made again until the options it came from are still those set, so that the last
// store is always of the last options set.
std::pair<std::chrono::microseconds, std::uint64_t> refresh_from_options() noexcept {
  std::uint64_t code = code_options.load();
  while (true) {
    const std::int64_t us = setting_or(std::getenv(kPollInterval.variable), kPollInterval,
                                       poll_us_of(code), poll_interval_reported);
    poll_us_in_effect.store(us);
    const std::uint64_t now = code_options.load();
    if (now == code) {
      return {std::chrono::microseconds(us), code};
    }
    code = now;
  }
}

}  // namespace

std::chrono::milliseconds exit_drain_setting() noexcept {
  return exit_drain_of(code_options.load());
}

std::chrono::microseconds refresh_poll_interval() noexcept { return refresh_from_options().first; }

ReleaseThreadOptions options_in_effect() noexcept {
  const auto [poll_interval, code] = refresh_from_options();
  return {poll_interval, exit_drain_of(code)};  // both of one set
}

std::chrono::microseconds poll_interval_in_effect() noexcept {
  const std::int64_t us = poll_us_in_effect.load(std::memory_order_relaxed);
  return us != 0 ? std::chrono::microseconds(us) : refresh_poll_interval();
}

}  // namespace holoscan::detail

namespace holoscan {

namespace {

// The range check of one field set from code; the message names the field and its range.
bool in_range(std::int64_t value, const detail::SettingRange& range) {
  return value >= range.min && value <= range.max;
}

}  // namespace

// A refusal's message is built on the heap: out of host memory the refusal is kResourceExhausted
// without one, never std::bad_alloc (nothing was changed by then).
expected<void, Error> set_release_thread_options(const ReleaseThreadOptions& options) try {
  using detail::kExitDrain;
  using detail::kPollInterval;
  if (!in_range(options.poll_interval.count(), kPollInterval)) {
    return make_unexpected(ErrorCode::kInvalidArgument,
                           "ReleaseThreadOptions::poll_interval must be 1 us to 1 s, not " +
                               std::to_string(options.poll_interval.count()) + " us");
  }
  if (!in_range(options.exit_drain.count(), kExitDrain)) {
    return make_unexpected(ErrorCode::kInvalidArgument,
                           "ReleaseThreadOptions::exit_drain must be 0 ms to 24 h, not " +
                               std::to_string(options.exit_drain.count()) + " ms");
  }
  detail::code_options.store(
      detail::code_options_of(options.poll_interval.count(), options.exit_drain.count()));
  (void)detail::refresh_poll_interval();
  // A rest begun under a long interval would otherwise last it out after a shorter one is set.
  if (detail::ReleaseQueue* queue = detail::ReleaseQueue::existing()) {
    queue->options_changed();
  }
  return {};
} catch (const std::bad_alloc&) {
  return detail::out_of_memory();
}

ReleaseThreadOptions release_thread_options() noexcept { return detail::options_in_effect(); }

}  // namespace holoscan
