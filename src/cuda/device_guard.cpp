#include "cuda/device_guard.hpp"

#include <string>

#include "cuda/cuda_error.hpp"

namespace holoscan::detail {

DeviceGuard::DeviceGuard(int device) noexcept {
  status_ = cuda().get_device(&previous_);
  if (status_ != cudaSuccess) {
    failed_call_ = "cudaGetDevice";
    return;
  }
  if (previous_ == device) {
    return;
  }
  status_ = cuda().set_device(device);
  if (status_ != cudaSuccess) {
    failed_call_ = "cudaSetDevice";
    return;
  }
  switched_ = true;
}

DeviceGuard::~DeviceGuard() {
  if (switched_ && cuda().set_device(previous_) != cudaSuccess) {
    (void)cuda().get_last_error();
  }
}

Error device_guard_error(const DeviceGuard& guard, int device, const char* who) {
  Error error = cuda_error(guard.status(), guard.failed_call());
  if (guard.status() == cudaErrorInvalidDevice) {
    error.code = ErrorCode::kInvalidArgument;  // the caller's argument, not a CUDA failure
    error.message = std::string(who) + ": device " + std::to_string(device) +
                    " is not a CUDA device of this process: " + error.message;
  } else {
    error.message = std::string(who) + ": " + error.message;  // as the caller's other refusals
  }
  return error;
}

}  // namespace holoscan::detail
