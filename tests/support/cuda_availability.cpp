#include "support/cuda_availability.hpp"

#include <cuda_runtime_api.h>

namespace holoscan::test {
namespace {

struct DeviceCount {
  cudaError_t status = cudaSuccess;
  int count = 0;
};

// The runtime answers the same for the life of the process; ask once.
const DeviceCount& device_count() {
  static const DeviceCount result = [] {
    DeviceCount r;
    r.status = cudaGetDeviceCount(&r.count);
    if (r.status != cudaSuccess) {
      r.count = 0;
    }
    return r;
  }();
  return result;
}

}  // namespace

bool cuda_device_available() {
  const DeviceCount& r = device_count();
  return r.status == cudaSuccess && r.count > 0;
}

std::string cuda_unavailable_reason() {
  const DeviceCount& r = device_count();
  if (r.status != cudaSuccess) {
    return std::string("cudaGetDeviceCount failed: ") + cudaGetErrorName(r.status) + " (" +
           cudaGetErrorString(r.status) + ")";
  }
  if (r.count == 0) {
    return "cudaGetDeviceCount reports no CUDA device";
  }
  return {};
}

}  // namespace holoscan::test
