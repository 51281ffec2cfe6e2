#include "protocol_streams.hpp"

#include "stream/stream_point.hpp"

namespace holoscan::python {

ProtocolStreamScope::ProtocolStreamScope(const Tensor& tensor, cudaStream_t stream) noexcept {
  const DLDevice device = tensor.device();
  if (device.device_type == kDLCUDA && holoscan::detail::is_default_stream_handle(stream)) {
    guard_.emplace(device.device_id);
  }
}

bool set_protocol_readiness(Tensor& tensor, cudaStream_t stream) {
  const ProtocolStreamScope scope(tensor, stream);
  return tensor.set_readiness_stream(stream);
}

expected<void, Error> order_protocol_consumer(Tensor& tensor, cudaStream_t stream) {
  const ProtocolStreamScope scope(tensor, stream);
  return tensor.synchronize_for_consumer_stream(stream);
}

}  // namespace holoscan::python
