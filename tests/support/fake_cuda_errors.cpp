// Names and descriptions of CUDA runtime errors, as the fake runtime gives them. Not through the
// real runtime: CUDA 13's cudaGetErrorName and cudaGetErrorString load and initialise the driver
// on first use wherever one is installed, which opens its device files (a dozen descriptors) and
// starts its threads in a process that is meant to run on the fake alone.
#include "support/fake_cuda.hpp"

namespace holoscan::test {

// Spelled by the preprocessor from the enumerator, which is the name the runtime reports.
#define HOLOSCAN_DLPACK_FAKE_ERROR_NAME(status) \
  case status:                                  \
    return #status;

const char* FakeCuda::error_name(cudaError_t status) noexcept {
  switch (status) {
    HOLOSCAN_DLPACK_FAKE_ERROR_NAME(cudaSuccess)
    HOLOSCAN_DLPACK_FAKE_ERROR_NAME(cudaErrorInvalidValue)
    HOLOSCAN_DLPACK_FAKE_ERROR_NAME(cudaErrorInvalidPitchValue)
    HOLOSCAN_DLPACK_FAKE_ERROR_NAME(cudaErrorMemoryAllocation)
    HOLOSCAN_DLPACK_FAKE_ERROR_NAME(cudaErrorInitializationError)
    HOLOSCAN_DLPACK_FAKE_ERROR_NAME(cudaErrorInsufficientDriver)
    HOLOSCAN_DLPACK_FAKE_ERROR_NAME(cudaErrorNoDevice)
    HOLOSCAN_DLPACK_FAKE_ERROR_NAME(cudaErrorInvalidDevice)
    HOLOSCAN_DLPACK_FAKE_ERROR_NAME(cudaErrorDevicesUnavailable)
    HOLOSCAN_DLPACK_FAKE_ERROR_NAME(cudaErrorSymbolNotFound)
    HOLOSCAN_DLPACK_FAKE_ERROR_NAME(cudaErrorInvalidResourceHandle)
    HOLOSCAN_DLPACK_FAKE_ERROR_NAME(cudaErrorNotReady)
    HOLOSCAN_DLPACK_FAKE_ERROR_NAME(cudaErrorIllegalAddress)
    HOLOSCAN_DLPACK_FAKE_ERROR_NAME(cudaErrorLaunchFailure)
    HOLOSCAN_DLPACK_FAKE_ERROR_NAME(cudaErrorPeerAccessAlreadyEnabled)
    HOLOSCAN_DLPACK_FAKE_ERROR_NAME(cudaErrorStreamCaptureUnsupported)
    HOLOSCAN_DLPACK_FAKE_ERROR_NAME(cudaErrorStreamCaptureInvalidated)
    HOLOSCAN_DLPACK_FAKE_ERROR_NAME(cudaErrorStreamCaptureIsolation)
    HOLOSCAN_DLPACK_FAKE_ERROR_NAME(cudaErrorStreamCaptureImplicit)
    HOLOSCAN_DLPACK_FAKE_ERROR_NAME(cudaErrorCapturedEvent)
    default:
      return nullptr;
  }
}

#undef HOLOSCAN_DLPACK_FAKE_ERROR_NAME

const char* FakeCuda::error_description(cudaError_t status) noexcept {
  return error_name(status) != nullptr ? "fake runtime error" : "unnamed fake runtime error";
}

}  // namespace holoscan::test
