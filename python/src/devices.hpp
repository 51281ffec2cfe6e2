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

/**
 * @brief The device `__dlpack_device__` reports, as Holoscan 5.0 does: CPU, pinned and managed
 *        memory as device_id 0 (no one device owns it), any other as stored.
 */
inline DLDevice protocol_device(DLDevice device) noexcept {
  const int type = device.device_type;
  const bool no_owner = type == kDLCPU || type == kDLCUDAHost || type == kDLCUDAManaged;
  return no_owner ? DLDevice{device.device_type, 0} : device;
}

}  // namespace holoscan::python
