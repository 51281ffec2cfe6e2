#pragma once
// Turns a failed CUDA runtime call into an Error; the message is built only on failure.
#include <cuda_runtime_api.h>

#include "holoscan/expected.hpp"

namespace holoscan::detail {

/** @brief Error{kCudaError, "<call> failed: <name> (<description>)", status}. */
Error cuda_error(cudaError_t status, const char* call);

/** @brief Success, or the Error for `status`. */
inline expected<void, Error> check_cuda(cudaError_t status, const char* call) {
  if (status == cudaSuccess) {
    return {};
  }
  return tl::unexpected<Error>(cuda_error(status, call));
}

}  // namespace holoscan::detail
