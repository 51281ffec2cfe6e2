#pragma once
// Counts heap allocations made by the calling thread (global operator new is replaced).
#include <cstdint>

namespace holoscan_bench {

/** @brief operator new calls made by this thread so far. */
std::uint64_t thread_allocations() noexcept;

}  // namespace holoscan_bench
