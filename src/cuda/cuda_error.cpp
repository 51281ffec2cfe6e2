#include "cuda/cuda_error.hpp"

#include <string>

namespace holoscan::detail {

Error cuda_error(cudaError_t status, const char* call) noexcept {
  // A failed runtime call also sets the thread's last error; clear it so that our failure does
  // not surface later in the caller's own cudaGetLastError check.
  (void)cuda().get_last_error();
  Error error{ErrorCode::kFailure, {}, static_cast<std::uint64_t>(status)};
  try {
    error.message.append(call)
        .append(" failed: ")
        .append(cuda().get_error_name(status))
        .append(" (")
        .append(cuda().get_error_string(status))
        .append(")");
  } catch (...) {
    error.message.clear();
  }
  return error;
}

Error make_error(ErrorCode code, const char* message) noexcept {
  Error error{code, {}, 0};
  try {
    error.message = message;
  } catch (...) {
    error.message.clear();
  }
  return error;
}

}  // namespace holoscan::detail
