#pragma once
// The memory behind a Tensor copy: allocated for the target device (host memory, page-locked
// host memory, stream-ordered device memory or managed memory) and freed, the matching way, once
// every readiness and deallocation point recorded on it has completed.
#include <cstddef>
#include <memory>

#include <dlpack/dlpack.h>

#include "holoscan/cuda_handles.hpp"
#include "holoscan/expected.hpp"
#include "holoscan/export.hpp"
#include "holoscan/stream_tracked_reference.hpp"

namespace holoscan::detail {

/** @brief Whether copies can go to (or come from) memory of `type`. */
HOLOSCAN_DLPACK_ABI bool copyable_device_type(std::int32_t type) noexcept;

/** @brief Whether the host reads memory of `type` directly (pageable or page-locked memory). */
HOLOSCAN_DLPACK_ABI bool host_memory_type(std::int32_t type) noexcept;

/** @brief Owner of a copy's memory; frees it after the points (possibly on the release thread). */
class HOLOSCAN_DLPACK_ABI CopyMemory final : public StreamTrackedReference {
 public:
  /**
   * @brief At least one byte of memory for `device`: kDLCPU from the heap (256-byte aligned),
   *        kDLCUDAHost by cudaMallocHost, kDLCUDAManaged by cudaMallocManaged, kDLCUDA by
   *        cudaMallocAsync on `stream` (which must be of that device). kResourceExhausted when
   *        the host heap refuses; kFailure (with the cudaError_t) when CUDA does.
   */
  static expected<std::shared_ptr<CopyMemory>, Error> allocate(DLDevice device, std::size_t bytes,
                                                               cudaStream_t stream);
  /** @brief Frees the memory once every point recorded on it has completed. */
  ~CopyMemory() override;
  CopyMemory(const CopyMemory&) = delete;
  CopyMemory& operator=(const CopyMemory&) = delete;

  /** @brief The first byte. */
  void* data() const noexcept { return data_; }

  struct Allocation;  ///< What the free needs: the memory, its kind and its device.

  /** @brief Use allocate(). */
  explicit CopyMemory(std::unique_ptr<Allocation> allocation) noexcept;

 private:
  std::unique_ptr<Allocation> allocation_;
  void* data_ = nullptr;
};

}  // namespace holoscan::detail
