#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <string>
#include <vector>

#include <holoscan/tensor.hpp>

#include "bindings.hpp"
#include "dtype.hpp"
#include "errors.hpp"
#include "exports.hpp"
#include "imports.hpp"
#include "stream_arg.hpp"

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

std::string repr(const Tensor& tensor) {
  const DLDevice device = tensor.device();
  std::string text = "Tensor(shape=(";
  const std::vector<std::int64_t> shape = tensor.shape();
  for (std::size_t i = 0; i < shape.size(); ++i) {
    text += (i > 0 ? ", " : "") + std::to_string(shape[i]);
  }
  text += shape.size() == 1 ? ",)" : ")";
  text += ", dtype='" + dtype_string(tensor.dtype()) + "', device=(" +
          std::to_string(device.device_type) + ", " + std::to_string(device.device_id) +
          "), read_only=" + (tensor.is_read_only() ? "True" : "False") + ")";
  return text;
}

}  // namespace

void bind_tensor(nb::module_& module) {
  nb::class_<Tensor>(module, "Tensor",
                     "A handle to shared, owned tensor memory (holoscan::Tensor). Handles share "
                     "the memory and its access authority; zero-copy imports are read-only.")
      .def_static("from_dlpack", &from_dlpack, nb::arg("obj"), nb::kw_only(),
                  nb::arg("stream") = nb::none(), nb::arg("copy") = nb::none(), Entry(),
                  "Imports any DLPack producer (or capsule) zero-copy, ordered for `stream`.")
      .def_prop_ro(
          "shape", [](const Tensor& t) { return int_tuple(t.shape()); }, Entry(),
          "Extent of each dimension.")
      .def_prop_ro(
          "strides", [](const Tensor& t) { return int_tuple(t.strides()); }, Entry(),
          "Stride of each dimension in bytes (as Holoscan reports them).")
      .def_prop_ro(
          "dtype", [](const Tensor& t) { return dtype_string(t.dtype()); }, Entry(),
          "NumPy type string ('<f4'), or the DLPack name of types NumPy lacks ('bfloat16').")
      .def_prop_ro(
          "dl_dtype",
          [](const Tensor& t) {
            const DLDataType d = t.dtype();
            return nb::make_tuple(d.code, d.bits, d.lanes);
          },
          Entry(), "DLPack (code, bits, lanes) of the element type.")
      .def_prop_ro("device", &dlpack_device, Entry(), "(device_type, device_id), DLPack codes.")
      .def_prop_ro("size", &Tensor::size, Entry(), "Number of elements.")
      .def_prop_ro("nbytes", &Tensor::nbytes, Entry(), "Bytes of the elements' payload.")
      .def_prop_ro("ndim", &Tensor::ndim, Entry(), "Number of dimensions.")
      .def_prop_ro("itemsize", &Tensor::itemsize, Entry(), "Bytes of one element.")
      .def_prop_ro(
          "data", [](const Tensor& t) { return reinterpret_cast<std::uintptr_t>(t.data()); },
          Entry(), "Address of the first element.")
      .def_prop_ro("read_only", &Tensor::is_read_only, Entry(),
                   "Whether this tensor has read-only authority (every zero-copy import has).")
      .def_prop_ro("flags", &Tensor::flags, Entry(), "The producer's DLPACK_FLAG_BITMASK_* bits.")
      .def_prop_ro(
          "readiness_stream",
          [](const Tensor& t) -> nb::object {
            if (!t.has_readiness_stream_contract()) {
              return nb::none();
            }
            return nb::int_(reinterpret_cast<std::intptr_t>(t.readiness_stream()));
          },
          Entry(), "Handle of the stream readiness was recorded on, or None.")
      .def("is_contiguous", &Tensor::is_contiguous, Entry(),
           "Whether the elements are compact and row-major.")
      .def("has_readiness_stream_contract", &Tensor::has_readiness_stream_contract, Entry(),
           "Whether a readiness point was recorded (consumers can be ordered after it).")
      .def(
          "set_readiness_stream",
          [](Tensor& t, nb::handle stream) { return t.set_readiness_stream(parse_stream(stream)); },
          nb::arg("stream"), Entry(),
          "Records the producer stream's current work as the point the data is ready at.")
      .def(
          "set_deallocation_stream",
          [](Tensor& t, nb::handle stream) {
            return t.set_deallocation_stream(parse_stream(stream));
          },
          nb::arg("stream"), Entry(),
          "Records a stream whose current work must finish before the memory is released.")
      .def(
          "synchronize_for_consumer",
          [](Tensor& t, nb::handle stream) {
            return ordered_or_raise(t.synchronize_for_consumer_stream(parse_stream(stream)));
          },
          nb::arg("stream"), Entry(),
          "Makes `stream` wait for the readiness point (one event wait, never a host block); "
          "False when there is no readiness point.")
      .def(
          "synchronize_for_host",
          [](Tensor& t) {
            expected<void, Error> result;
            {
              nb::gil_scoped_release unlocked;  // a host wait must not stall other threads
              result = t.synchronize_for_host();
            }
            return ordered_or_raise(result);
          },
          Entry(), "Blocks until the readiness point completed; False when there is none.")
      .def("__dlpack__", &export_dlpack, nb::kw_only(), nb::arg("stream") = nb::none(),
           nb::arg("max_version") = nb::none(), nb::arg("dl_device") = nb::none(),
           nb::arg("copy") = nb::none(), Entry(),
           "Exports a DLPack capsule zero-copy, after ordering `stream` after readiness.")
      .def("__dlpack_device__", &dlpack_device, Entry(), "(device_type, device_id).")
      .def_prop_ro("__cuda_array_interface__", &cuda_array_interface, Entry(),
                   "CUDA array interface v3 of a device tensor (AttributeError on host tensors).")
      .def_prop_ro("__array_interface__", &array_interface, Entry(),
                   "NumPy array interface v3 of a host tensor (AttributeError on device tensors).")
      .def("__repr__", &repr, Entry());
}

}  // namespace holoscan::python
