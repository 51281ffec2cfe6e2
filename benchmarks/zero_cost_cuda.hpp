#pragma once
// A CUDA table whose every call succeeds at once and does nothing (streams and events are bare
// handles, every event has completed), installed at the library's one seam, so that a benchmark of
// the stream hooks measures the library's own work alone: its bookkeeping on the caller's thread,
// and the hand-over to the release thread and back, with the release thread running.
#include "cuda/cuda_api.hpp"  // the table's type carries the library's ABI tag: no forward declaration

namespace holoscan_bench {

/** @brief Installs the zero-cost table for one scope (with no CUDA event pooled before or after). */
class ZeroCostCudaScope {
 public:
  /** @brief Destroys the pooled events of the table in use, then installs the zero-cost one. */
  ZeroCostCudaScope();
  /** @brief Waits for the deferred releases, destroys the pooled events, restores the table. */
  ~ZeroCostCudaScope();
  ZeroCostCudaScope(const ZeroCostCudaScope&) = delete;
  ZeroCostCudaScope& operator=(const ZeroCostCudaScope&) = delete;

  /** @brief A stream handle of the zero-cost runtime (device 0; its id is unique). */
  static cudaStream_t stream(int index) noexcept;

 private:
  const holoscan::detail::CudaApi* previous_;
};

}  // namespace holoscan_bench
