#pragma once
// Turns a failed CUDA runtime call into an Error; the message is built only on failure, and
// building it never throws (an out-of-memory message is left empty), so noexcept paths may use it.
#include "cuda/cuda_api.hpp"
#include "holoscan/expected.hpp"
#include "wing_api.hpp"

namespace holoscan::detail {

/** @brief Error{kFailure, "<call> failed: <name> (<description>)", status}; never throws. */
HOLOSCAN_DLPACK_WING_API Error cuda_error(cudaError_t status, const char* call) noexcept;

/** @brief Error{code, message}; never throws (the message is dropped if it cannot be stored). */
HOLOSCAN_DLPACK_WING_API Error make_error(ErrorCode code, const char* message) noexcept;

/**
 * @brief For a call whose failure the library does not report (a free, a destroy, a best-effort
 *        wait or mode switch): a failure's error is cleared from the thread's last error, so that
 *        the caller's own cudaGetLastError check (or a deleter's) does not find it. True on
 *        success.
 */
inline bool succeeded_or_cleared(cudaError_t status) noexcept {
  if (status == cudaSuccess) {
    return true;
  }
  (void)cuda().get_last_error();
  return false;
}

/** @brief Success, or the Error for `status`. */
inline expected<void, Error> check_cuda(cudaError_t status, const char* call) noexcept {
  if (status == cudaSuccess) {
    return {};
  }
  return tl::unexpected<Error>(cuda_error(status, call));
}

}  // namespace holoscan::detail
