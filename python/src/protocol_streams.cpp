#include "protocol_streams.hpp"

namespace holoscan::python {

bool set_protocol_readiness(Tensor& tensor, cudaStream_t stream) {
  const holoscan::detail::DefaultStreamDevice scope(tensor.device(), stream);
  return tensor.set_readiness_stream(stream);
}

expected<void, Error> order_protocol_consumer(Tensor& tensor, cudaStream_t stream) {
  const holoscan::detail::DefaultStreamDevice scope(tensor.device(), stream);
  return tensor.synchronize_for_consumer_stream(stream);
}

}  // namespace holoscan::python
