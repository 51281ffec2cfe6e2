#pragma once
// Counts the library's CUDA calls by installing a table that forwards every entry to another one
// (the real runtime, or a test's fake) at the library's one seam, per calling thread and in all,
// per entry.
#include <array>
#include <cstddef>
#include <cstdint>

#include "cuda/cuda_api.hpp"  // the table's type carries the library's ABI tag: no forward declaration

namespace holoscan_bench {

/** @brief Entries of the library's CUDA table, in the table's order. */
inline constexpr std::size_t kCountedEntries = 27;

/** @brief The entries' CUDA names, in the table's order. */
extern const std::array<const char*, kCountedEntries> kCountedEntryNames;

/** @brief Calls per entry. */
using CallCounts = std::array<std::uint64_t, kCountedEntries>;

/** @brief Nanoseconds spent inside the calls, per entry. */
using CallNanos = std::array<std::uint64_t, kCountedEntries>;

/**
 * @brief Installs the counting table in front of `base` (null: the real runtime) and returns the
 *        table that was in use. Install the returned table again to stop counting.
 */
const holoscan::detail::CudaApi* count_library_cuda_calls(
    const holoscan::detail::CudaApi* base = nullptr);

/** @brief The table the counting table forwards to (set by count_library_cuda_calls). */
const holoscan::detail::CudaApi* counted_base_table() noexcept;

/** @brief Calls made through the table by this thread so far. */
std::uint64_t library_calls_on_this_thread() noexcept;

/** @brief Calls made through the table by every thread so far. */
std::uint64_t library_calls_in_all() noexcept;

/** @brief Calls per entry made by this thread so far. */
CallCounts library_calls_by_entry_on_this_thread() noexcept;

/** @brief Calls per entry made by every thread so far. */
CallCounts library_calls_by_entry_in_all() noexcept;

/**
 * @brief Times each call through the counting table (a steady_clock reading before and after
 *        it) while `on`; off by default, since the readings cost tens of nanoseconds a call.
 */
void time_library_cuda_calls(bool on) noexcept;

/** @brief Nanoseconds spent inside calls through the table by this thread while timing was on. */
CallNanos library_call_nanos_by_entry_on_this_thread() noexcept;

}  // namespace holoscan_bench
