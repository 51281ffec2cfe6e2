// The two import entry points, from_dlpack and as_tensor: which protocol an object is taken
// through, and what importing a Tensor of our own means.
#include <Python.h>

#include <nanobind/stl/string.h>

#include <string>

#include <holoscan/tensor.hpp>

#include "cast_arg.hpp"
#include "devices.hpp"
#include "dlpack/read_only_export.hpp"
#include "errors.hpp"
#include "exports.hpp"
#include "imports.hpp"
#include "protocol_streams.hpp"
#include "without_gil.hpp"

namespace nb = nanobind;

namespace holoscan::python {
namespace {

// A writable Tensor keeps its writer authority; the import is a new context over the same
// memory with read-only authority (an export of ours, imported), ready where the consumer is.
// The consumer's stream waits on the GPU for the tensor's readiness point (no host block).
void order_consumer(Tensor& tensor, const ProtocolStream& consumer) {
  if (consumer.kind != ProtocolStream::Kind::kNoSync && cuda_ordered(tensor.device().device_type) &&
      tensor.has_readiness_stream_contract() &&
      !ready_on_legacy_default(tensor.readiness_stream(), consumer.handle)) {
    if (auto ordered = order_protocol_consumer(tensor, consumer.handle); !ordered) {
      raise_error(ordered.error());
    }
  }
}

Tensor read_only_wrapper(Tensor& tensor, const ProtocolStream& consumer) {
  if (cuda_ordered(tensor.device().device_type)) {
    order_consumer(tensor, consumer);
  } else {
    // Memory no stream orders (kDLCPU): the wrapper is a new import without the tensor's
    // readiness point, so the host waits for that point here, as the tensor's own exports do.
    wait_ready_on_host(tensor);
  }
  // A read-only export: the wrapper only reads, so it takes no mutable export lease, which
  // would refuse the tensor's own exports and writes while the wrapper lives.
  auto managed = holoscan::detail::export_read_only(tensor);
  if (!managed) {
    raise_error(managed.error());
  }
  auto wrapper = make_tensor_from_dlpack_versioned(*managed);
  if (!wrapper) {
    (*managed)->deleter(*managed);  // a rejection leaves the export with us
    raise_error(wrapper.error());
  }
  record_import_readiness(*wrapper, consumer);
  return std::move(*wrapper);
}

// Holoscan 5.0: importing a read-only Tensor returns the same object, its consumer's stream
// ordered after its readiness as for any import; a writable one a new read-only wrapper.
nb::object import_tensor(nb::handle object, const ProtocolStream& consumer) {
  Tensor& tensor = initialized_tensor(object);
  if (tensor.is_read_only()) {
    order_consumer(tensor, consumer);
    return nb::borrow(object);
  }
  return nb::cast(read_only_wrapper(tensor, consumer));
}

// The DLPack protocol is both methods: Holoscan 5.0's as_tensor passes an object with only one of
// them over for the array interfaces.
bool has_dlpack(nb::handle object) {
  return PyCapsule_CheckExact(object.ptr()) ||
         (attribute_if_any(object, "__dlpack__").is_valid() &&
          attribute_if_any(object, "__dlpack_device__").is_valid());
}

// Holoscan 5.0 parses the stream of every import with one rule: the import records a readiness
// point, which -1 (no synchronization) cannot give.
ProtocolStream import_stream(nb::handle stream, const char* entry) {
  const ProtocolStream consumer = parse_protocol_stream(stream);
  if (consumer.kind == ProtocolStream::Kind::kNoSync) {
    // Holoscan 5.0's sentence first, so that code matching its message matches ours.
    raise_invalid_argument(std::string(entry) +
                           ": Tensor import requires a readiness stream; stream=-1 is unsupported "
                           "(pass None or 1 for the legacy default stream, 2, or a stream)");
  }
  return consumer;
}

}  // namespace

Tensor& initialized_tensor(nb::handle object) {
  // nb::cast would raise RuntimeError "std::bad_cast" for a Tensor whose construction never ran
  // (Tensor.__new__): a wrong argument, as __dlpack__ reports it.
  if (!nb::inst_ready(object)) {
    throw nb::type_error("the Tensor was never initialized");
  }
  return *nb::inst_ptr<Tensor>(object);
}

void order_explicit_consumer(Tensor& tensor, const ProtocolStream& consumer) {
  if (consumer.kind != ProtocolStream::Kind::kStream || !tensor.has_readiness_stream_contract() ||
      ready_on_legacy_default(tensor.readiness_stream(), consumer.handle)) {
    return;
  }
  if (auto ordered = order_protocol_consumer(tensor, consumer.handle); !ordered) {
    raise_error(ordered.error());
  }
}

nb::object from_dlpack(nb::handle object, nb::handle stream, nb::handle copy) {
  if (!copy.is_none() && !PyBool_Check(copy.ptr())) {
    throw nb::type_error("copy must be None, True or False");
  }
  const ProtocolStream consumer = import_stream(stream, "from_dlpack");
  const bool wants_copy = copy.ptr() == Py_True;  // a copy can only be asked of __dlpack__
  if (!wants_copy && nb::isinstance<Tensor>(object)) {
    return import_tensor(object, consumer);
  }
  if (!wants_copy) {
    if (std::optional<Tensor> tensor = import_through_exchange_api(object, consumer)) {
      return nb::cast(std::move(*tensor));
    }
  }
  // No protocol at all (a producer with one of its two methods fails in the one it lacks).
  if (!PyCapsule_CheckExact(object.ptr()) && !attribute_if_any(object, "__dlpack__").is_valid() &&
      !attribute_if_any(object, "__dlpack_device__").is_valid()) {
    throw nb::attribute_error(("from_dlpack: object does not support the __dlpack__ protocol (a " +
                               type_text(object) + " has no __dlpack__)")
                                  .c_str());
  }
  return nb::cast(import_protocol(object, consumer, copy));
}

nb::object as_tensor(nb::handle object, nb::handle stream) {
  const ProtocolStream consumer = import_stream(stream, "as_tensor");
  if (nb::isinstance<Tensor>(object)) {
    return import_tensor(object, consumer);
  }
  if (std::optional<Tensor> tensor = import_through_exchange_api(object, consumer)) {
    return nb::cast(std::move(*tensor));
  }
  if (has_dlpack(object)) {
    return nb::cast(import_protocol(object, consumer, nb::none()));
  }
  // A property may build its description anew: it is dropped as held_reference.hpp says.
  if (const HeldReference cuda = attribute_if_any(object, "__cuda_array_interface__");
      cuda.is_valid()) {
    return nb::cast(import_array_interface(object, cuda.handle(), true, consumer));
  }
  if (const HeldReference host = attribute_if_any(object, "__array_interface__"); host.is_valid()) {
    return nb::cast(import_array_interface(object, host.handle(), false, consumer));
  }
  throw nb::type_error(("as_tensor: object does not support __dlpack_c_exchange_api__, "
                        "__dlpack__, __cuda_array_interface__, or __array_interface__ (a " +
                        type_text(object) + ")")
                           .c_str());
}

}  // namespace holoscan::python
