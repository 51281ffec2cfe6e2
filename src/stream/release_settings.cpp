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

// Releases the release thread may leave unexamined or un-run before a drop waits for it.
constexpr SettingRange kBacklog{"HOLOSCAN_DLPACK_RELEASE_BACKLOG", "releases", 0, 100'000};
constexpr std::int64_t kDefaultBacklog = 4096;

// Set from code (set_release_thread_options), for when the environment says nothing: all three
// in one word (20, 27 and 17 bits), so that threads setting options at once leave one's whole
// set, never one's interval with another's drain.
constexpr int kPollBits = 20;
constexpr int kDrainBits = 27;
constexpr int kBacklogBits = 17;
static_assert(kPollInterval.max < (std::int64_t{1} << kPollBits) &&
                  kExitDrain.max < (std::int64_t{1} << kDrainBits) &&
                  kBacklog.max < (std::int64_t{1} << kBacklogBits) &&
                  kPollBits + kDrainBits + kBacklogBits <= 64,
              "each setting fits its part of the word");
constexpr std::uint64_t code_options_of(std::int64_t poll_us, std::int64_t exit_drain_ms,
                                        std::int64_t backlog) {
  return static_cast<std::uint64_t>(backlog) << (kPollBits + kDrainBits) |
         static_cast<std::uint64_t>(exit_drain_ms) << kPollBits |
         static_cast<std::uint64_t>(poll_us);
}
std::int64_t field_of(std::uint64_t code, int shift, int bits) {
  return static_cast<std::int64_t>((code >> shift) & ((std::uint64_t{1} << bits) - 1));
}
std::int64_t poll_us_of(std::uint64_t code) { return field_of(code, 0, kPollBits); }
std::int64_t exit_drain_ms_of(std::uint64_t code) { return field_of(code, kPollBits, kDrainBits); }
std::int64_t backlog_of(std::uint64_t code) {
  return field_of(code, kPollBits + kDrainBits, kBacklogBits);
}
std::atomic<std::uint64_t> code_options{
    code_options_of(kDefaultPollUs, kDefaultExitDrainMs, kDefaultBacklog)};
// What the release thread and the drops use; the poll interval 0 until first read.
std::atomic<std::int64_t> poll_us_in_effect{0};
std::atomic<std::size_t> backlog_in_effect{kDefaultBacklog};

// One message per variable and process: a setting read at every exit or thread start would
// otherwise repeat it.
std::atomic<bool> exit_drain_reported{false};
std::atomic<bool> poll_interval_reported{false};
std::atomic<bool> backlog_reported{false};

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

// Stores the interval and the backlog limit of the options set and returns the interval with the
// options it came from. Another thread may set options between this read of them and the stores,
// and store its own first: the stores are made again until the options they came from are still
// those set, so that the last stores are always of the last options set.
std::pair<std::chrono::microseconds, std::uint64_t> refresh_from_options() noexcept {
  std::uint64_t code = code_options.load();
  while (true) {
    const std::int64_t us = setting_or(std::getenv(kPollInterval.variable), kPollInterval,
                                       poll_us_of(code), poll_interval_reported);
    const std::int64_t backlog =
        setting_or(std::getenv(kBacklog.variable), kBacklog, backlog_of(code), backlog_reported);
    poll_us_in_effect.store(us);
    backlog_in_effect.store(static_cast<std::size_t>(backlog));
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
  // All of one set (the backlog limit as refresh_from_options stored it from the same word).
  return {poll_interval, exit_drain_of(code), backlog_limit_in_effect()};
}

std::size_t backlog_limit_in_effect() noexcept {
  return backlog_in_effect.load(std::memory_order_relaxed);
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
  using detail::kBacklog;
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
  if (options.backlog_limit > static_cast<std::size_t>(kBacklog.max)) {
    return make_unexpected(ErrorCode::kInvalidArgument,
                           "ReleaseThreadOptions::backlog_limit must be 0 to 100000, not " +
                               std::to_string(options.backlog_limit));
  }
  detail::code_options.store(
      detail::code_options_of(options.poll_interval.count(), options.exit_drain.count(),
                              static_cast<std::int64_t>(options.backlog_limit)));
  (void)detail::refresh_poll_interval();  // the backlog limit too
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
