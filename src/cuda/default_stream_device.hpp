#pragma once
// Makes a tensor's device current while a default-stream handle is used for it. No CUDA header:
// the Python binding, which is built without the toolkit's headers, includes it.
#include <dlpack/dlpack.h>

#include "holoscan/cuda_handles.hpp"
#include "wing_api.hpp"

namespace holoscan::detail {

/**
 * @brief Keeps `device` current for a scope where `stream` is a default-stream handle (null,
 *        legacy or per-thread) and `device` is CUDA device or managed memory, so that the handle
 *        names that device's default stream rather than the current device's; elsewhere it does
 *        nothing. A failed switch leaves the current device (the calls made then report their
 *        own failure); the caller's device is current again when the scope ends.
 */
class HOLOSCAN_DLPACK_WING_API DefaultStreamDevice {
 public:
  /** @brief Makes `device` current when `stream` is a default-stream handle. */
  DefaultStreamDevice(DLDevice device, cudaStream_t stream) noexcept;
  /** @brief Makes the caller's device current again. */
  ~DefaultStreamDevice();
  DefaultStreamDevice(const DefaultStreamDevice&) = delete;
  DefaultStreamDevice& operator=(const DefaultStreamDevice&) = delete;

 private:
  int previous_ = -1;
  bool switched_ = false;
};

}  // namespace holoscan::detail
