#pragma once
// Host-callable launchers of the tiny test kernels that make stream races observable.
#include <cstdint>
#include <holoscan/cuda_handles.hpp>

#ifdef __CUDACC__
#define HDL_TEST_HOST_DEVICE __host__ __device__
#else
#define HDL_TEST_HOST_DEVICE
#endif

namespace holoscan::test {

/** @brief What a consumer kernel saw; zero it before the launch (the kernel accumulates). */
struct CheckResult {
  unsigned long long checksum;  ///< Sum of the values read in the last pass.
  unsigned int mismatches;      ///< Elements that differed from the pattern, over every pass.
  unsigned int reserved;        ///< Keeps the struct 16 bytes.
};

/** @brief The value a producer writes at `index` for `seed`; never 0, so zeroed memory is stale. */
HDL_TEST_HOST_DEVICE inline std::uint32_t pattern_value(std::uint32_t seed, std::uint64_t index) {
  std::uint32_t x = seed * 0x9E3779B9u + static_cast<std::uint32_t>(index) * 0x85EBCA6Bu +
                    static_cast<std::uint32_t>(index >> 32);
  x ^= x >> 16;
  x *= 0x7FEB352Du;
  x ^= x >> 15;
  return x | 1u;
}

/** @brief The checksum a consumer reports when every element holds the pattern of `seed`. */
inline unsigned long long expected_checksum(std::uint32_t seed, std::uint64_t count) {
  unsigned long long sum = 0;
  for (std::uint64_t i = 0; i < count; ++i) {
    sum += pattern_value(seed, i);
  }
  return sum;
}

// Every launcher returns the cudaError_t of the launch as an int (0 is cudaSuccess), so that this
// header needs no CUDA header.

/** @brief Spins `delay_us` microseconds of GPU time, then writes pattern_value(seed, i). */
int launch_slow_fill(std::uint32_t* data, std::uint64_t count, std::uint32_t seed,
                     std::uint64_t delay_us, cudaStream_t stream);

/**
 * @brief Compares `data` with the pattern of `seed` and adds into `*result`.
 *
 * With `delay_us` > 0 it reads twice: at once (catches data not yet produced) and again after
 * spinning `delay_us` (catches memory reused while the consumer still runs). Reads bypass L1.
 */
int launch_check(const std::uint32_t* data, std::uint64_t count, std::uint32_t seed,
                 std::uint64_t delay_us, CheckResult* result, cudaStream_t stream);

/** @brief Loads every test kernel on every device now, so no launch waits for a lazy load. */
int load_all_kernels();

/** @brief Keeps `stream` busy for `duration_us` microseconds (one warp spinning). */
int launch_spin(std::uint64_t duration_us, cudaStream_t stream);

/** @brief Writes `value` into every element at once. */
int launch_fill(std::uint32_t* data, std::uint64_t count, std::uint32_t value, cudaStream_t stream);

}  // namespace holoscan::test
