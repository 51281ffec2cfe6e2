#include "device_guard.hpp"

namespace holoscan::detail {

DeviceGuard::DeviceGuard(int device) noexcept {
  status_ = cudaGetDevice(&previous_);
  if (status_ != cudaSuccess) {
    failed_call_ = "cudaGetDevice";
    return;
  }
  if (previous_ == device) {
    return;
  }
  status_ = cudaSetDevice(device);
  if (status_ != cudaSuccess) {
    failed_call_ = "cudaSetDevice";
    return;
  }
  switched_ = true;
}

DeviceGuard::~DeviceGuard() {
  if (switched_ && cudaSetDevice(previous_) != cudaSuccess) {
    (void)cudaGetLastError();
  }
}

}  // namespace holoscan::detail
