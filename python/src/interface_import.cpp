#include <Python.h>

#include <nanobind/stl/string.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <holoscan/dlpack_utils.hpp>

#include "cast_arg.hpp"
#include "dlpack/dlpack_validate.hpp"
#include "errors.hpp"
#include "imports.hpp"
#include "python_release.hpp"
#include "without_gil.hpp"

namespace nb = nanobind;

namespace holoscan::python {
namespace {

// A managed tensor built from an array-interface dict; it keeps the exporting object alive, and
// drops it through release_with_python for the same reasons as a DLPack producer.
struct InterfaceOwner final : PythonRelease {
  DLManagedTensorVersioned managed{};
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;
  PyObject* object = nullptr;  // strong reference

  static void library_deleter(DLManagedTensorVersioned* self) noexcept {
    release_with_python(static_cast<InterfaceOwner*>(self->manager_ctx));
  }

  static void run_release(PythonRelease* node, bool python_alive) noexcept {
    auto* owner = static_cast<InterfaceOwner*>(node);
    if (python_alive) {
      ErrorIndicatorGuard keep_callers_error;
      // Its finalizers are Python code, run from this noexcept path: see running_python.
      running_python([&] { Py_XDECREF(owner->object); });
    }
    delete owner;
  }
};

// Any sequence of integers but text, as Holoscan 5.0 reads the interface's shape and strides
// (PySequence_Fast), with its sentence leading the refusal.
std::vector<std::int64_t> int_sequence(nb::handle value, const char* what) {
  if (!non_text_sequence(value)) {
    throw nb::type_error(
        ("array interface " + std::string(what) + " must be a sequence, not " + type_text(value))
            .c_str());
  }
  return sequence_int64s(value, what);
}

DLDevice interface_device(std::uintptr_t data, bool cuda) {
  if (!cuda) {
    return DLDevice{kDLCPU, 0};
  }
  if (data == 0) {
    return DLDevice{kDLCUDA, 0};  // an empty array: no memory to ask about
  }
  auto device = dldevice_from_pointer(reinterpret_cast<void*>(data));
  if (!device) {
    raise_error(device.error());
  }
  return *device;
}

}  // namespace

PyObject* array_interface_exporter(const DLManagedTensorVersioned* managed) noexcept {
  if (managed == nullptr || managed->deleter != &InterfaceOwner::library_deleter) {
    return nullptr;
  }
  return static_cast<const InterfaceOwner*>(managed->manager_ctx)->object;
}

Tensor import_array_interface(nb::handle object, nb::handle description, bool cuda,
                              const ProtocolStream& consumer) {
  const char* attribute = cuda ? "__cuda_array_interface__" : "__array_interface__";
  if (!nb::isinstance<nb::dict>(description)) {
    throw nb::type_error((std::string(attribute) + " must be a dict").c_str());
  }
  auto dict = nb::borrow<nb::dict>(description);
  const auto entry = [&](const char* key) -> nb::object {
    PyObject* value = PyDict_GetItemString(dict.ptr(), key);  // borrowed, no error set
    return value != nullptr ? nb::borrow(value) : nb::none();
  };
  // Holoscan 5.0's sentence for a key the interface must have.
  const auto required = [&](const char* key) -> nb::object {
    PyObject* value = PyDict_GetItemString(dict.ptr(), key);  // borrowed, no error set
    if (value == nullptr) {
      throw nb::type_error(
          ("array interface is missing required key '" + std::string(key) + "' (" + attribute + ")")
              .c_str());
    }
    return nb::borrow(value);
  };
  if (!entry("mask").is_none()) {
    raise_invalid_argument("a masked array interface is not supported");
  }
  const nb::object data = required("data");
  // The tuple's own size: a subclass's len() may say 2 of a tuple that holds fewer items.
  if (!nb::isinstance<nb::tuple>(data) || PyTuple_GET_SIZE(data.ptr()) != 2) {
    throw nb::type_error(
        (std::string(attribute) + "['data'] must be a (pointer, read_only) tuple").c_str());
  }
  const auto data_key = [&] { return std::string(attribute) + "['data']"; };
  const nb::handle pointer = nb::borrow<nb::tuple>(data)[0];
  const std::optional<std::uintptr_t> address =
      integer_argument<std::uintptr_t>(pointer, [&] { return data_key() + "[0]"; });
  if (!address) {
    raise_invalid_argument(data_key() + "[0] " + display_text(pointer) + " is not an address");
  }
  const bool read_only = cast_or_type_error<bool>(nb::borrow<nb::tuple>(data)[1], [&] {
    return data_key() + " must be a (pointer, read_only) tuple";
  });
  const auto typestr = cast_or_type_error<std::string>(
      required("typestr"), [&] { return std::string(attribute) + "['typestr'] must be a string"; });
  auto dtype = dldatatype_from_typestr(typestr);
  if (!dtype) {
    raise_error(dtype.error());
  }
  ProtocolStream stream = cuda ? parse_protocol_stream(entry("stream")) : ProtocolStream{};
  stream.object = nullptr;  // borrowed from a value of the dict: not to be kept
  if (cuda && stream.kind == ProtocolStream::Kind::kNoSync) {
    raise_invalid_argument("__cuda_array_interface__['stream'] -1 is not a stream");
  }

  auto owner = std::make_unique<InterfaceOwner>();
  owner->run = &InterfaceOwner::run_release;
  owner->shape = int_sequence(required("shape"), "shape");
  const std::int64_t item = static_cast<std::int64_t>(dlpack_dtype_item_size_bytes(*dtype));
  const auto ndim = static_cast<std::int32_t>(owner->shape.size());
  const nb::object strides = entry("strides");
  // None (compact) goes to the import as DLPack's null strides, which it fills in: the Tensor's
  // own array interfaces then say None too, as the producer did.
  const bool compact = strides.is_none();
  if (!compact) {
    owner->strides = int_sequence(strides, "strides");
    if (owner->strides.size() != owner->shape.size()) {
      raise_invalid_argument("array interface strides length must match shape rank (" +
                             std::to_string(owner->strides.size()) + " strides, " +
                             std::to_string(owner->shape.size()) + " dimensions)");
    }
    for (std::int64_t& stride : owner->strides) {
      if (stride % item != 0) {
        raise_invalid_argument("stride " + std::to_string(stride) +
                               " bytes is not a multiple of the item size " + std::to_string(item));
      }
      stride /= item;
    }
  }
  DLManagedTensorVersioned& managed = owner->managed;
  managed.version =
      DLPackVersion{HOLOSCAN_DLPACK_IMPL_VERSION_MAJOR, HOLOSCAN_DLPACK_IMPL_VERSION_MINOR};
  managed.flags = read_only ? DLPACK_FLAG_BITMASK_READ_ONLY : 0;
  managed.manager_ctx = owner.get();
  managed.deleter = &InterfaceOwner::library_deleter;
  managed.dl_tensor.data = reinterpret_cast<void*>(*address);
  managed.dl_tensor.device = interface_device(*address, cuda);
  managed.dl_tensor.ndim = ndim;
  managed.dl_tensor.dtype = *dtype;
  managed.dl_tensor.shape = ndim > 0 ? owner->shape.data() : nullptr;
  managed.dl_tensor.strides = ndim > 0 && !compact ? owner->strides.data() : nullptr;

  auto tensor = make_tensor_from_dlpack_versioned(&managed);
  if (!tensor) {
    raise_error(tensor.error());  // ownership stayed here: `owner` frees it
  }
  owner->object = object.inc_ref().ptr();
  owner.release();  // the library owns it now, through the deleter
  if (stream.kind == ProtocolStream::Kind::kStream) {
    record_import_readiness(*tensor, stream);  // the readiness the exporter advertised
  }
  order_explicit_consumer(*tensor, consumer);
  return std::move(*tensor);
}

}  // namespace holoscan::python
