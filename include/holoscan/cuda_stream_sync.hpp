#pragma once
/**
 * @file
 * @brief Holoscan's free helpers that order one CUDA stream after another, or the host after one.
 */
#include "holoscan/cuda_handles.hpp"
#include "holoscan/expected.hpp"

namespace holoscan {

/**
 * @brief Makes `consumer_stream` wait for the work queued so far on `producer_stream`: one pooled
 *        event recorded on the producer (on its device), one cudaStreamWaitEvent; nothing when
 *        the two handles are the same. kFailure names the failing call.
 */
HOLOSCAN_DLPACK_API expected<void, Error> synchronize_cuda_streams(cudaStream_t producer_stream,
                                                                   cudaStream_t consumer_stream);

/** @brief Blocks the calling thread until the work queued so far on `producer_stream` is done. */
HOLOSCAN_DLPACK_API expected<void, Error> synchronize_cuda_stream_for_host(
    cudaStream_t producer_stream);

}  // namespace holoscan
