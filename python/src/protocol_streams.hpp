#pragma once
// The Python protocols' default streams (DLPack's `stream` 1 and 2, the C exchange API's null
// work stream, __cuda_array_interface__'s 1 and 2) are those of the tensor's device; the core
// reads a default-stream handle as the current device's, as the CUDA runtime does. These calls
// make the tensor's device current around the core's call when the two could differ.
#include <cuda_runtime_api.h>

#include <optional>

#include "cuda/device_guard.hpp"
#include "holoscan/tensor.hpp"

namespace holoscan::python {

/**
 * @brief Keeps the tensor's device current while it lives, where `stream` names a default stream
 *        and the tensor is in CUDA device memory (a failed switch leaves the current device, and
 *        the calls made then report their own failure).
 */
class ProtocolStreamScope {
 public:
  /** @brief Switches to the device of `tensor` when `stream` is a default-stream handle. */
  ProtocolStreamScope(const Tensor& tensor, cudaStream_t stream) noexcept;

 private:
  std::optional<holoscan::detail::DeviceGuard> guard_;
};

/** @brief tensor.set_readiness_stream(stream), a default stream being the tensor's device's. */
bool set_protocol_readiness(Tensor& tensor, cudaStream_t stream);

/** @brief tensor.synchronize_for_consumer_stream(stream), a default stream being the tensor's
 *         device's. */
expected<void, Error> order_protocol_consumer(Tensor& tensor, cudaStream_t stream);

}  // namespace holoscan::python
