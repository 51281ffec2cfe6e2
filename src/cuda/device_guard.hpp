#pragma once
// Makes a device current for one scope and restores the caller's device afterwards.
#include "cuda/cuda_api.hpp"
#include "holoscan/errors.hpp"
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

/**
 * @brief The error of a guard whose switch to `device` failed: kInvalidArgument, "<who>: device N
 *        is not a CUDA device of this process: ..." when CUDA says so (cudaErrorInvalidDevice),
 *        else the failed call's CUDA error after "<who>: ". Either way the message ends with
 *        CUDA's error name.
 */
HOLOSCAN_DLPACK_WING_API Error device_guard_error(const DeviceGuard& guard, int device,
                                                  const char* who);

}  // namespace holoscan::detail
