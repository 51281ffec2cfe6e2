#pragma once
// Counts the library's CUDA calls by installing a table that forwards every entry to the real one
// (an interposer at the library's one seam), per calling thread and in all.
#include <cstdint>

namespace holoscan_bench {

/** @brief Installs the counting table in front of the real one (idempotent). */
void count_library_cuda_calls();

/** @brief Calls made through the table by this thread so far. */
std::uint64_t library_calls_on_this_thread() noexcept;

/** @brief Calls made through the table by every thread so far. */
std::uint64_t library_calls_in_all() noexcept;

}  // namespace holoscan_bench
