// Tensor::copy_to from Python. The copy may wait on the host (a host target is complete on
// return; a host source waits for its readiness first), so the GIL is let go around it.
#include "tensor_copy.hpp"

#include <utility>

#include <holoscan/tensor_pool.hpp>

#include "bindings.hpp"
#include "dl_types.hpp"
#include "errors.hpp"
#include "without_gil.hpp"

namespace nb = nanobind;

namespace holoscan::python {
namespace {

// A handle of our own for the call without the GIL (the caller's object may be dropped meanwhile
// by another thread); it is dropped again with the GIL held, as every last owner may need it.
template <typename Copy>
expected<Tensor, Error> copy_without_gil(const Tensor& tensor, Copy&& copy) {
  const Tensor source = tensor;
  return without_gil([&] { return copy(source); });
}

Tensor copy_or_raise(expected<Tensor, Error> copy, Raise kind) {
  if (!copy) {
    raise_error(copy.error(), kind);
  }
  return std::move(*copy);
}

Tensor copy(const Tensor& tensor, nb::handle stream) {
  const cudaStream_t on = parse_stream(stream);
  return copy_or_raise(copy_without_gil(tensor, [&](const Tensor& t) { return t.copy(on); }),
                       Raise::kByCode);
}

Tensor copy_to(const Tensor& tensor, nb::handle where, nb::handle stream) {
  const cudaStream_t on = parse_stream(stream);
  if (nb::isinstance<TensorPool>(where)) {
    TensorPool& pool = nb::cast<TensorPool&>(where);  // kept alive by the caller's argument
    return copy_or_raise(
        copy_without_gil(tensor, [&](const Tensor& t) { return t.copy_to(pool, on); }),
        Raise::kByCode);
  }
  const DLDevice target = parse_device(where, "device", Bools::kRefused);
  return copy_or_raise(
      copy_without_gil(tensor, [&](const Tensor& t) { return t.copy_to(target, on); }),
      Raise::kByCode);
}

// -1: nobody orders work after the copy's readiness point, so the host waits for it.
expected<Tensor, Error> copy_settled(const Tensor& source, DLDevice target) {
  auto copy = source.copy_to(target, kLegacyStream);
  if (copy && copy->has_readiness_stream_contract()) {
    if (auto done = copy->synchronize_for_host(); !done) {
      return forward_error(std::move(done));
    }
  }
  return copy;
}

}  // namespace

Tensor copy_for_export(const Tensor& tensor, DLDevice target, const ProtocolStream& consumer) {
  if (consumer.kind == ProtocolStream::Kind::kNoSync) {
    return copy_or_raise(
        copy_without_gil(tensor, [&](const Tensor& t) { return copy_settled(t, target); }),
        Raise::kBuffer);
  }
  return copy_or_raise(
      copy_without_gil(tensor, [&](const Tensor& t) { return t.copy_to(target, consumer.handle); }),
      Raise::kBuffer);
}

void bind_tensor_copies(nb::class_<Tensor>& tensor_type) {
  tensor_type
      .def("copy", &copy, nb::kw_only(), nb::arg("stream") = nb::none(), Entry(),
           nb::sig("def copy(self, *, stream: object | None = None) -> Tensor"),
           "An owning, compact, writable copy on the same device (C++ Tensor::copy; not in "
           "Holoscan 5.0's Python Tensor). A device copy is queued on `stream` (the stream "
           "hooks' values: None or 0 the default stream) after the readiness point and returns "
           "at once, its readiness recorded there; a host copy is complete on return.")
      .def("copy_to", &copy_to, nb::arg("device"), nb::kw_only(), nb::arg("stream") = nb::none(),
           Entry(),
           nb::sig("def copy_to(self, device: DLDevice | tuple[int, int] | TensorPool, *, "
                   "stream: object | None = None) -> Tensor"),
           "An owning, compact, writable copy on `device` (DLCPU, DLCUDAHOST, DLCUDA, "
           "DLCUDAMANAGED) or in a block of a TensorPool (C++ Tensor::copy_to; not in Holoscan "
           "5.0's Python Tensor). Ordered on `stream` as copy() is; a host target is complete on "
           "return. InvalidArgumentError for an unsupported device or a stream of another "
           "device, ResourceExhaustedError for a full pool, FailureError for a failed CUDA "
           "call.");
}

}  // namespace holoscan::python
