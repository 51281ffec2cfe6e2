#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <string>
#include <vector>

#include <holoscan/tensor.hpp>

#include "bindings.hpp"
#include "dl_types.hpp"
#include "dlpack_fastcall.hpp"
#include "errors.hpp"
#include "exports.hpp"
#include "imports.hpp"
#include "stream_arg.hpp"
#include "tensor_copy.hpp"
#include "without_gil.hpp"

namespace nb = nanobind;

namespace holoscan::python {
namespace {

nb::tuple int_tuple(const std::vector<std::int64_t>& values) {
  PyObject* tuple = PyTuple_New(static_cast<Py_ssize_t>(values.size()));
  if (tuple == nullptr) {
    throw nb::python_error();
  }
  nb::tuple result = nb::steal<nb::tuple>(tuple);
  for (std::size_t i = 0; i < values.size(); ++i) {
    PyObject* item = PyLong_FromLongLong(values[i]);
    if (item == nullptr) {
      throw nb::python_error();
    }
    PyTuple_SET_ITEM(tuple, static_cast<Py_ssize_t>(i), item);
  }
  return result;
}

// kNotImplemented is the library's "no readiness contract": nothing to order, not a failure.
bool ordered_or_raise(const expected<void, Error>& result) {
  if (result) {
    return true;
  }
  if (result.error().code == ErrorCode::kNotImplemented) {
    return false;
  }
  raise_error(result.error());
}

bool synchronize_for_consumer_stream(Tensor& tensor, nb::handle stream) {
  return ordered_or_raise(tensor.synchronize_for_consumer_stream(parse_stream(stream)));
}

std::string repr(const Tensor& tensor) {
  std::string text = "Tensor(shape=(";
  const std::vector<std::int64_t> shape = tensor.shape();
  for (std::size_t i = 0; i < shape.size(); ++i) {
    text += (i > 0 ? ", " : "") + std::to_string(shape[i]);
  }
  text += shape.size() == 1 ? ",)" : ")";
  return text + ", dtype=" + dtype_repr(tensor.dtype()) +
         ", device=" + device_repr(tensor.device()) +
         ", is_read_only=" + (tensor.is_read_only() ? "True" : "False") + ")";
}

// Holoscan 5.0's names and meanings: the properties, is_contiguous, the import entry points.
void bind_holoscan_api(nb::class_<Tensor>& type) {
  type.def_static("as_tensor", &as_tensor, nb::arg("obj").none(), nb::kw_only(),
                  nb::arg("stream") = nb::none(), Entry(),
                  nb::sig("def as_tensor(obj: object, *, stream: object | None = None) -> Tensor"),
                  "A Tensor from a Tensor or any object with the DLPack C exchange API, "
                  "__dlpack__, __cuda_array_interface__ or __array_interface__ (that order), "
                  "zero-copy and read-only; `stream` -1 is refused.")
      .def_static("from_dlpack", &from_dlpack, nb::arg("obj").none(), nb::kw_only(),
                  nb::arg("stream") = nb::none(), nb::arg("copy") = nb::none(), Entry(),
                  nb::sig("def from_dlpack(obj: object, *, stream: object | None = None, "
                          "copy: bool | None = None) -> Tensor"),
                  "Imports any DLPack producer (or capsule) zero-copy, read-only, ordered for "
                  "`stream` (-1 is refused).")
      .def_prop_ro("ndim", &Tensor::ndim, Entry(), "Number of dimensions.")
      .def_prop_ro(
          "shape", [](const Tensor& t) { return int_tuple(t.shape()); }, Entry(),
          nb::sig("def shape(self) -> tuple[int, ...]"), "Extent of each dimension.")
      .def_prop_ro(
          "strides", [](const Tensor& t) { return int_tuple(t.strides()); }, Entry(),
          nb::sig("def strides(self) -> tuple[int, ...]"), "Stride of each dimension, in bytes.")
      .def_prop_ro("size", &Tensor::size, Entry(), "Number of elements.")
      .def_prop_ro("itemsize", &Tensor::itemsize, Entry(), "Bytes of one element.")
      .def_prop_ro("nbytes", &Tensor::nbytes, Entry(), "Bytes of the elements' payload.")
      .def_prop_ro(
          "byte_offset", [](const Tensor& t) { return t.dl_tensor().byte_offset; }, Entry(),
          "Offset in bytes from the start of the allocation (DLPack's data) to the first "
          "element.")
      .def_prop_ro("device", &Tensor::device, Entry(), "The DLDevice the data resides on.")
      .def_prop_ro("dtype", &Tensor::dtype, Entry(), "The DLDataType of the elements.")
      .def_prop_ro(
          "data", [](const Tensor& t) { return reinterpret_cast<std::uintptr_t>(t.data()); },
          Entry(), "Address of the first element.")
      .def_prop_ro("is_read_only", &Tensor::is_read_only, Entry(),
                   "Whether this tensor has read-only authority (every zero-copy import has).")
      .def("is_contiguous", &Tensor::is_contiguous, Entry(),
           "Whether the elements are compact and row-major.");
}

// Holoscan 5.0's protocols: DLPack (both directions) and the array interfaces.
void bind_protocols(nb::class_<Tensor>& type) {
  bind_dlpack_method(type);  // a plain CPython method: see dlpack_fastcall.hpp
  type.def("__dlpack_device__", &dlpack_device, Entry(),
           nb::sig("def __dlpack_device__(self) -> tuple[int, int]"),
           "(device_type, device_id) as ints; CPU, pinned and managed tensors report "
           "device_id 0, CUDA tensors their ordinal.")
      .def_prop_ro("__cuda_array_interface__", &cuda_array_interface, Entry(),
                   nb::sig("def __cuda_array_interface__(self) -> dict[str, object]"),
                   "CUDA array interface v3 of a device tensor, ordered before the legacy default "
                   "stream it names (AttributeError on host tensors).")
      .def_prop_ro("__array_interface__", &array_interface, Entry(),
                   nb::sig("def __array_interface__(self) -> dict[str, object]"),
                   "NumPy array interface v3 of a host tensor, after a host wait for its "
                   "readiness (AttributeError on device tensors).");
  bind_exchange_export(type);
}

// Beyond Holoscan's Python Tensor: the C++ stream hooks and copies, the producer's flags.
void bind_stream_hooks(nb::class_<Tensor>& type) {
  type.def_prop_ro("flags", &Tensor::flags, Entry(), "The producer's DLPACK_FLAG_BITMASK_* bits.")
      .def_prop_ro(
          "readiness_stream",
          [](const Tensor& t) -> nb::object {
            if (!t.has_readiness_stream_contract()) {
              return nb::none();
            }
            return nb::int_(reinterpret_cast<std::intptr_t>(t.readiness_stream()));
          },
          Entry(), nb::sig("def readiness_stream(self) -> int | None"),
          "Handle of the stream readiness was recorded on, or None.")
      .def("has_readiness_stream_contract", &Tensor::has_readiness_stream_contract, Entry(),
           "Whether a readiness point was recorded (consumers can be ordered after it).")
      .def(
          "set_readiness_stream",
          [](Tensor& t, nb::handle stream) { return t.set_readiness_stream(parse_stream(stream)); },
          nb::arg("stream").none(), Entry(),
          "Records the producer stream's current work as the point the data is ready at.")
      .def(
          "set_deallocation_stream",
          [](Tensor& t, nb::handle stream) {
            return t.set_deallocation_stream(parse_stream(stream));
          },
          nb::arg("stream").none(), Entry(),
          "Records a stream whose current work must finish before the memory is released.")
      .def("synchronize_for_consumer_stream", &synchronize_for_consumer_stream,
           nb::arg("stream").none(), Entry(),
           "Makes `stream` wait for the readiness point (one event wait, never a host block); "
           "False when there is no readiness point.")
      .def(
          "synchronize_for_host",
          [](Tensor& t) {
            // A host wait must not stall other threads.
            return ordered_or_raise(without_gil([&] { return t.synchronize_for_host(); }));
          },
          Entry(), "Blocks until the readiness point completed; False when there is none.")
      .def("__repr__", &repr, Entry());
  bind_tensor_copies(type);
}

// The spellings before Holoscan 5.0's; each warns and names its replacement.
void bind_deprecated(nb::class_<Tensor>& type) {
  type.def_prop_ro(
          "read_only",
          [](const Tensor& t) {
            warn_deprecated(
                "holoscan_dlpack: Tensor.read_only is deprecated; use Tensor.is_read_only");
            return t.is_read_only();
          },
          Entry(), "Deprecated: use is_read_only.")
      .def_prop_ro(
          "dl_dtype",
          [](const Tensor& t) {
            warn_deprecated(
                "holoscan_dlpack: Tensor.dl_dtype is deprecated; use Tensor.dtype (a "
                "DLDataType)");
            const DLDataType d = t.dtype();
            return nb::make_tuple(d.code, d.bits, d.lanes);
          },
          Entry(), nb::sig("def dl_dtype(self) -> tuple[int, int, int]"),
          "Deprecated: use dtype (code, bits, lanes).")
      .def(
          "synchronize_for_consumer",
          [](Tensor& t, nb::handle stream) {
            warn_deprecated(
                "holoscan_dlpack: Tensor.synchronize_for_consumer is deprecated; use "
                "Tensor.synchronize_for_consumer_stream");
            return synchronize_for_consumer_stream(t, stream);
          },
          nb::arg("stream").none(), Entry(), "Deprecated: use synchronize_for_consumer_stream.");
}

// Whether `self` holds a Tensor of its own: not one under construction, nor a view of another
// object's member (ucx.Received.tensor), whose Tensor and references are that object's.
bool owns_its_tensor(PyObject* self) {
  const auto [ready, destruct] = nb::inst_state(self);
  return ready && destruct;
}

// An import keeps the object that owns its memory alive where nothing else does (an array
// interface's exporter, a DLPack producer whose tensor has no deleter); one that holds its import
// (a cache) makes a cycle that the collector sees only through these: the reference is reported
// while this Tensor alone owns the memory, and clearing the Tensor releases it.
int traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(self));  // a heap type's instances report their type
  if (owns_its_tensor(self)) {
    Py_VISIT(sole_owners_producer(*nb::inst_ptr<Tensor>(self)));
  }
  return 0;
}

int clear(PyObject* self) {
  if (owns_its_tensor(self)) {
    *nb::inst_ptr<Tensor>(self) = Tensor();
  }
  return 0;
}

PyType_Slot tensor_slots[] = {{Py_tp_traverse, reinterpret_cast<void*>(&traverse)},
                              {Py_tp_clear, reinterpret_cast<void*>(&clear)},
                              {0, nullptr}};

}  // namespace

void bind_tensor(nb::module_& module) {
  nb::class_<Tensor> type(module, "Tensor",
                          "An n-dimensional array shared with NumPy, CuPy and PyTorch through "
                          "DLPack and the array interfaces (holoscan.Tensor). Handles share the "
                          "memory and its access authority; zero-copy imports are read-only.",
                          nb::type_slots(tensor_slots),
                          // As a pybind11 class, Holoscan's Tensor can be weakly referenced.
                          nb::is_weak_referenceable());
  bind_holoscan_api(type);
  bind_protocols(type);
  bind_stream_hooks(type);
  bind_deprecated(type);
}

}  // namespace holoscan::python
