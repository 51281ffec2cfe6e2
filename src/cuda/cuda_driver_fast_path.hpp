#pragma once
// The hot CUDA calls made through the driver API where that is cheaper and means the same, with
// the runtime call as the answer whenever the driver call cannot be made or does not succeed.
#include <cuda_runtime_api.h>

#include "holoscan/export.hpp"

namespace holoscan::detail::fast {

/** @brief cudaEventRecord; cuEventRecord for an explicit stream. */
HOLOSCAN_DLPACK_ABI cudaError_t event_record(cudaEvent_t event, cudaStream_t stream);
/** @brief cudaStreamWaitEvent; cuStreamWaitEvent for an explicit stream and default flags. */
HOLOSCAN_DLPACK_ABI cudaError_t stream_wait_event(cudaStream_t stream, cudaEvent_t event,
                                                  unsigned int flags);
/** @brief cudaEventQuery; cuEventQuery when it succeeds or reports "not ready". */
HOLOSCAN_DLPACK_ABI cudaError_t event_query(cudaEvent_t event);
/** @brief cudaStreamIsCapturing; cuStreamIsCapturing for an explicit stream. */
HOLOSCAN_DLPACK_ABI cudaError_t stream_is_capturing(cudaStream_t stream,
                                                    cudaStreamCaptureStatus* status);
/** @brief cudaStreamGetDevice; cuStreamGetDevice for an explicit stream. */
HOLOSCAN_DLPACK_ABI cudaError_t stream_get_device(cudaStream_t stream, int* device);
/** @brief cudaStreamGetId; cuStreamGetId for an explicit stream. */
HOLOSCAN_DLPACK_ABI cudaError_t stream_get_id(cudaStream_t stream, unsigned long long* id);

}  // namespace holoscan::detail::fast
