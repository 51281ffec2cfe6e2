// The landing probe's kernels (landing_kernels.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

/** @brief Launches a kernel that does nothing on `stream`. */
cudaError_t launch_nothing(cudaStream_t stream);

/** @brief Copies `bytes` (a multiple of 4) from `from` to `to` with a kernel on `stream`. */
cudaError_t launch_copy_words(void* to, const void* from, std::size_t bytes, cudaStream_t stream);
