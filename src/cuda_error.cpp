#include "cuda_error.hpp"

#include <string>

namespace holoscan::detail {

Error cuda_error(cudaError_t status, const char* call) {
  // A failed runtime call also sets the thread's last error; clear it so that our failure does
  // not surface later in the caller's own cudaGetLastError check.
  (void)cudaGetLastError();
  std::string message(call);
  message += " failed: ";
  message += cudaGetErrorName(status);
  message += " (";
  message += cudaGetErrorString(status);
  message += ")";
  return Error{ErrorCode::kCudaError, std::move(message), static_cast<std::uint64_t>(status)};
}

}  // namespace holoscan::detail
