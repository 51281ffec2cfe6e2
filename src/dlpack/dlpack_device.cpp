#include "cuda/cuda_error.hpp"
#include "holoscan/dlpack_utils.hpp"

#include <utility>

namespace holoscan {

expected<DLDevice, Error> dldevice_from_pointer(void* ptr) {
  cudaPointerAttributes attributes{};
  const cudaError_t status = detail::cuda().pointer_get_attributes(&attributes, ptr);
  if (status == cudaErrorNoDevice || status == cudaErrorInsufficientDriver) {
    (void)detail::cuda().get_last_error();
    return DLDevice{kDLCPU, 0};  // without a usable driver no memory can belong to a GPU
  }
  if (status != cudaSuccess) {
    // Holoscan 5.0's sentence for this failure first, then the call and CUDA's error name.
    Error error = detail::cuda_error(status, "cudaPointerGetAttributes");
    try {
      error.message.insert(0, "Failed to determine DLDevice based on pointer: ");
    } catch (...) {  // out of host memory: the code and the cudaError_t still say what failed
    }
    return make_unexpected(std::move(error));
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
