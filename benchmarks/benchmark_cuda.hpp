#pragma once
// Shared set-up for GPU benchmarks: a device check and two non-blocking streams per benchmark.
#include <cuda_runtime_api.h>

#include <benchmark/benchmark.h>

namespace holoscan_bench {

/** @brief True when a CUDA device can be used; otherwise marks `state` skipped with the reason. */
bool require_gpu(benchmark::State& state);

/** @brief Two non-blocking streams on the current device, destroyed with this object. */
struct StreamPair {
  StreamPair();
  ~StreamPair();
  StreamPair(const StreamPair&) = delete;
  StreamPair& operator=(const StreamPair&) = delete;
  cudaStream_t producer = nullptr;  ///< Where readiness is recorded.
  cudaStream_t consumer = nullptr;  ///< Where the data is read.
};

}  // namespace holoscan_bench
