#include "cuda/cuda_error.hpp"
#include "holoscan/dlpack_utils.hpp"

namespace holoscan {

expected<DLDevice, Error> dldevice_from_pointer(void* ptr) {
  cudaPointerAttributes attributes{};
  const cudaError_t status = detail::cuda().pointer_get_attributes(&attributes, ptr);
  if (status == cudaErrorNoDevice || status == cudaErrorInsufficientDriver) {
    (void)detail::cuda().get_last_error();
    return DLDevice{kDLCPU, 0};  // without a usable driver no memory can belong to a GPU
  }
  if (status != cudaSuccess) {
    return make_unexpected(detail::cuda_error(status, "cudaPointerGetAttributes"));
  }
  switch (attributes.type) {
    case cudaMemoryTypeDevice:
      return DLDevice{kDLCUDA, attributes.device};
    case cudaMemoryTypeHost:
      return DLDevice{kDLCUDAHost, 0};
    case cudaMemoryTypeManaged:
      return DLDevice{kDLCUDAManaged, 0};
    case cudaMemoryTypeUnregistered:
    default:
      return DLDevice{kDLCPU, 0};
  }
}

}  // namespace holoscan
