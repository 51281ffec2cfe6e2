#pragma once
#include "holoscan/export.hpp"
// The release thread's settings as the environment gives them: parsed strictly, clamped to a
// range that no deadline computation can overflow, and reported (once) when they are not used
// as written.
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>

#include "holoscan/deferred_release.hpp"

namespace holoscan::detail {

/** @brief What a setting accepts, for parsing and for the messages about it. */
struct SettingRange {
  const char* variable;  ///< The environment variable.
  const char* unit;      ///< "us" or "ms".
  std::int64_t min;      ///< Smaller values are clamped up to it.
  std::int64_t max;      ///< Larger values (however many digits) are clamped down to it.
};

/**
 * @brief The value to use for a setting whose variable holds `text`.
 *
 * Null or empty: `fallback`. Anything but decimal digits (a sign, a space, an exponent, a unit):
 * `fallback`, with one line on stderr. Digits outside the range: the nearest bound, with one line
 * on stderr. A line is printed only while `reported` is false, which it then becomes.
 */
HOLOSCAN_DLPACK_ABI std::int64_t setting_or(const char* text, const SettingRange& range,
                                            std::int64_t fallback,
                                            std::atomic<bool>& reported) noexcept;

/** @brief The exit drain's limit: HOLOSCAN_DLPACK_EXIT_DRAIN_MS (read now), else code's. */
HOLOSCAN_DLPACK_ABI std::chrono::milliseconds exit_drain_setting() noexcept;

/**
 * @brief The shortest rest between polling rounds: HOLOSCAN_DLPACK_RELEASE_POLL_US (read now),
 *        else code's; it becomes the interval in effect, and the backlog limit
 *        (HOLOSCAN_DLPACK_RELEASE_BACKLOG, else code's) the limit in effect.
 */
HOLOSCAN_DLPACK_ABI std::chrono::microseconds refresh_poll_interval() noexcept;

/** @brief The options of one set, the interval (and backlog limit) refreshed as by
 *         refresh_poll_interval(). */
HOLOSCAN_DLPACK_ABI ReleaseThreadOptions options_in_effect() noexcept;

/**
 * @brief Releases the release thread may be behind by before a drop waits for it (0: no limit),
 *        as last refreshed with the poll interval (one relaxed atomic load).
 */
HOLOSCAN_DLPACK_ABI std::size_t backlog_limit_in_effect() noexcept;

/** @brief The poll interval in effect, as last refreshed (one atomic load). */
HOLOSCAN_DLPACK_ABI std::chrono::microseconds poll_interval_in_effect() noexcept;

}  // namespace holoscan::detail
