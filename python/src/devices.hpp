#pragma once
// Which DLPack devices take which Python protocol.
#include <dlpack/dlpack.h>

namespace holoscan::python {

/** @brief Devices whose producers take a consumer `stream` in `__dlpack__` (array API). */
inline bool producer_takes_stream(int device_type) noexcept {
  return device_type == kDLCUDA || device_type == kDLCUDAManaged || device_type == kDLROCM;
}

/** @brief Devices whose work this library can order on CUDA streams. */
inline bool cuda_ordered(int device_type) noexcept {
  return device_type == kDLCUDA || device_type == kDLCUDAManaged || device_type == kDLCUDAHost;
}

/** @brief Devices that `__cuda_array_interface__` describes (device-accessible memory). */
inline bool cuda_array_device(int device_type) noexcept {
  return device_type == kDLCUDA || device_type == kDLCUDAManaged;
}

/** @brief Devices that `__array_interface__` describes (host memory, pinned included). */
inline bool host_device(int device_type) noexcept {
  return device_type == kDLCPU || device_type == kDLCUDAHost || device_type == kDLROCMHost;
}

}  // namespace holoscan::python
