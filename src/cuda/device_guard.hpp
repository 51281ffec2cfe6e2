#pragma once
// Makes a device current for one scope and restores the caller's device afterwards.
#include "cuda/cuda_api.hpp"
#include "holoscan/export.hpp"
#include "wing_api.hpp"

namespace holoscan::detail {

/** @brief Sets `device` current only if it is not already; restores the previous one on exit. */
class HOLOSCAN_DLPACK_WING_API DeviceGuard {
 public:
  /** @brief Switches to `device` when needed; check status() before relying on it. */
  explicit DeviceGuard(int device) noexcept;
  /** @brief Restores the caller's device (errors are swallowed: destructors never throw). */
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

  /** @brief cudaSuccess when `device` is current. */
  cudaError_t status() const noexcept { return status_; }
  /** @brief The call that failed, for the error message. */
  const char* failed_call() const noexcept { return failed_call_; }

 private:
  int previous_ = -1;
  bool switched_ = false;
  cudaError_t status_ = cudaSuccess;
  const char* failed_call_ = "";
};

}  // namespace holoscan::detail
