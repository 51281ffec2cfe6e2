#include "cuda/default_stream_device.hpp"

#include "cuda/cuda_api.hpp"
#include "stream/stream_point.hpp"

namespace holoscan::detail {

DefaultStreamDevice::DefaultStreamDevice(DLDevice device, cudaStream_t stream) noexcept {
  if ((device.device_type != kDLCUDA && device.device_type != kDLCUDAManaged) ||
      !is_default_stream_handle(stream)) {
    return;
  }
  const CudaApi& api = cuda();
  if (api.get_device(&previous_) != cudaSuccess) {
    (void)api.get_last_error();  // no driver, say: the call made next reports it
    return;
  }
  if (previous_ == device.device_id) {
    return;
  }
  if (api.set_device(device.device_id) != cudaSuccess) {
    (void)api.get_last_error();
    return;
  }
  switched_ = true;
}

DefaultStreamDevice::~DefaultStreamDevice() {
  if (switched_ && cuda().set_device(previous_) != cudaSuccess) {
    (void)cuda().get_last_error();
  }
}

}  // namespace holoscan::detail
