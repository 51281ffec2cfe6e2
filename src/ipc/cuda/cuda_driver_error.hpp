#pragma once
// Turns a failed CUDA driver call (the VMM and pointer-attribute entry points) into an Error, the
// way cuda_error.hpp does for runtime calls: the call, the driver's error name and its text.
#include <cuda.h>

#include "holoscan/expected.hpp"

namespace holoscan::detail {

/** @brief Error{kFailure, "<call> failed: <name> (<description>)", status}; never throws. */
Error driver_error(CUresult status, const char* call) noexcept;

/** @brief Success, or the Error for `status`. */
inline expected<void, Error> check_driver(CUresult status, const char* call) noexcept {
  if (status == CUDA_SUCCESS) {
    return {};
  }
  return tl::unexpected<Error>(driver_error(status, call));
}

}  // namespace holoscan::detail
