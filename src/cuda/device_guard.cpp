#include "cuda/device_guard.hpp"

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

}  // namespace holoscan::detail
