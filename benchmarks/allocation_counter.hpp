#pragma once
// Counts heap allocations made by the calling thread (global operator new is replaced). A binary
// that links PyTorch builds with HOLOSCAN_BENCH_COUNT_ALLOCATIONS=0: replacing operator new under
// libtorch is not safe, and that binary's allocation counts come from the plain one.
#include <cstdint>

#include <benchmark/benchmark.h>

// The binary that links PyTorch leaves the 16-thread runs out (HOLOSCAN_BENCH_MULTI_THREADED=0):
// with them that process aborted on the H200 (heap corruption reported at random points), while
// every benchmark passed alone; the plain binary runs them.
#if !defined(HOLOSCAN_BENCH_MULTI_THREADED) || HOLOSCAN_BENCH_MULTI_THREADED
#define HOLOSCAN_BENCH_SIXTEEN_THREADS(name) BENCHMARK(name)->Threads(16)->UseRealTime()
#else
#define HOLOSCAN_BENCH_SIXTEEN_THREADS(name) static_assert(true, "left out")
#endif

namespace holoscan_bench {

/** @brief operator new calls made by this thread so far. */
std::uint64_t thread_allocations() noexcept;

/** @brief Sets the counter allocs_per_iter from the allocations made since `start`. */
inline void report_allocations(benchmark::State& state, std::uint64_t start) {
#if defined(HOLOSCAN_BENCH_COUNT_ALLOCATIONS) && !HOLOSCAN_BENCH_COUNT_ALLOCATIONS
  (void)state;
  (void)start;
  return;
#endif
  state.counters["allocs_per_iter"] = benchmark::Counter(
      static_cast<double>(thread_allocations() - start) / static_cast<double>(state.iterations()));
}

}  // namespace holoscan_bench
