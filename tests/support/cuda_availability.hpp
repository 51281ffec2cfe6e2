#pragma once
// Whether the CUDA runtime sees a device, for tests that need one (or need there to be none).
#include <string>

namespace holoscan::test {

/** @brief True when cudaGetDeviceCount succeeds and reports at least one device. */
bool cuda_device_available();

/** @brief Why no device is usable (with the cudaGetErrorName of the failure); empty if one is. */
std::string cuda_unavailable_reason();

}  // namespace holoscan::test
