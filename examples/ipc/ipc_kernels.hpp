#pragma once
// The demo's GPU work: a producer writes a pattern, a relay transforms it, a consumer checks it.
// Every launcher returns the launch's cudaError_t as an int, so this header needs no CUDA header.
#include <cstdint>

#include <holoscan/cuda_handles.hpp>

namespace ipc_demo {

/** @brief Writes pattern(sequence, i) into every element, after spinning `delay_us`. */
int launch_fill(std::uint32_t* data, std::uint64_t count, std::uint32_t sequence,
                std::uint64_t delay_us, cudaStream_t stream);

/** @brief out[i] = in[i] + 1. */
int launch_add_one(const std::uint32_t* in, std::uint32_t* out, std::uint64_t count,
                   cudaStream_t stream);

/** @brief Adds to `*mismatches` the elements that differ from pattern(sequence, i) + offset. */
int launch_check(const std::uint32_t* data, std::uint64_t count, std::uint32_t sequence,
                 std::uint32_t offset, unsigned long long* mismatches, cudaStream_t stream);

}  // namespace ipc_demo
