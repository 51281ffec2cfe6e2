#pragma once
// The README's cross-process example (two_processes.cpp), with the kernels it launches, which the
// program that links it provides.
#include <cstdint>
#include <string>

#include <holoscan/cuda_handles.hpp>

/** @brief Queues data[i] = value for `count` elements on `stream` (the program's kernel). */
void launch_fill(float* data, std::int64_t count, float value, cudaStream_t stream);
/** @brief Queues a kernel that reads `count` elements of `data` on `stream`. */
void launch_read(const float* data, std::int64_t count, cudaStream_t stream);

/** @brief Process 1 of the README: publishes `count` tensors to whoever connects to `path`. */
void produce(const std::string& path, int count, cudaStream_t stream);
/** @brief Process 2 of the README: receives and reads `count` tensors from `path`. */
void consume(const std::string& path, int count, cudaStream_t stream);
