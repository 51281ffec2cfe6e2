#pragma once
// The Python protocols' default streams (DLPack's `stream` 1 and 2, the C exchange API's null
// work stream, __cuda_array_interface__'s 1 and 2) are those of the tensor's device; the core
// reads a default-stream handle as the current device's, as the CUDA runtime does. These calls
// make the tensor's device current around the core's call where the two could differ
// (holoscan::detail::DefaultStreamDevice, which callers with more calls to make use directly).
#include "cuda/default_stream_device.hpp"
#include "holoscan/cuda_handles.hpp"
#include "holoscan/tensor.hpp"

namespace holoscan::python {

/** @brief tensor.set_readiness_stream(stream), a default stream being the tensor's device's. */
bool set_protocol_readiness(Tensor& tensor, cudaStream_t stream);

/** @brief tensor.synchronize_for_consumer_stream(stream), a default stream being the tensor's
 *         device's. */
expected<void, Error> order_protocol_consumer(Tensor& tensor, cudaStream_t stream);

}  // namespace holoscan::python
