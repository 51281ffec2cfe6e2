// DLDevice and DLDataType, the value types of Tensor.device and Tensor.dtype (Holoscan 5.0's
// holoscan.tensor classes). Until the old spellings go, a DLDevice still compares equal to and
// unpacks like the (device_type, device_id) tuple that `device` used to be, and a DLDataType
// compares equal to its old NumPy type string; both with a DeprecationWarning.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <string>

#include "bindings.hpp"
#include "cast_arg.hpp"
#include "dl_types.hpp"
#include "dtype.hpp"
#include "errors.hpp"

namespace nb = nanobind;

namespace holoscan::python {
namespace {

constexpr const char* kDeviceTupleDeprecated =
    "holoscan_dlpack: using a DLDevice as a (device_type, device_id) tuple is deprecated; use "
    ".device_type and .device_id";
constexpr const char* kDtypeStringDeprecated =
    "holoscan_dlpack: comparing Tensor.dtype with a NumPy type string is deprecated; compare "
    "with a DLDataType (code, bits, lanes)";

nb::tuple device_tuple(const DLDevice& device) {
  return nb::make_tuple(static_cast<int>(device.device_type), device.device_id);
}

nb::object device_equals(const DLDevice& self, nb::handle other) {
  DLDevice theirs{};
  if (nb::isinstance<DLDevice>(other)) {
    theirs = nb::cast<DLDevice>(other);
  } else if (nb::isinstance<nb::tuple>(other)) {
    warn_deprecated(kDeviceTupleDeprecated);
    return nb::bool_(device_tuple(self).equal(other));
  } else {
    return nb::borrow(Py_NotImplemented);
  }
  return nb::bool_(self.device_type == theirs.device_type && self.device_id == theirs.device_id);
}

nb::tuple dtype_tuple(const DLDataType& dtype) {
  return nb::make_tuple(dtype.code, dtype.bits, dtype.lanes);
}

nb::object dtype_equals(const DLDataType& self, nb::handle other) {
  if (nb::isinstance<DLDataType>(other)) {
    const auto theirs = nb::cast<DLDataType>(other);
    return nb::bool_(self.code == theirs.code && self.bits == theirs.bits &&
                     self.lanes == theirs.lanes);
  }
  if (nb::isinstance<nb::str>(other)) {
    warn_deprecated(kDtypeStringDeprecated);
    return nb::bool_(dtype_string(self) == utf8_text(other));  // none: no dtype's string
  }
  return nb::borrow(Py_NotImplemented);
}

void bind_device(nb::module_& module) {
  nb::class_<DLDevice>(module, "DLDevice",
                       "A DLPack device: a device_type (DLDeviceType) and an integer device_id.")
      .def(
          "__init__",
          [](DLDevice* self, std::int32_t device_type, std::int32_t device_id) {
            new (self) DLDevice{static_cast<DLDeviceType>(device_type), device_id};
          },
          nb::arg("device_type"), nb::arg("device_id"))
      .def_prop_ro(
          "device_type",
          [](const DLDevice& d) { return device_type_object(static_cast<int>(d.device_type)); },
          nb::sig("def device_type(self) -> DLDeviceType"), "The device type (DLDeviceType).")
      .def_prop_ro(
          "device_id", [](const DLDevice& d) { return d.device_id; }, "The device ordinal.")
      .def("__repr__", &device_repr)
      // .none(): `device == None` is False, as for any other type, not a TypeError.
      .def("__eq__", &device_equals, nb::arg("other").none(),
           nb::sig("def __eq__(self, other: object, /) -> bool"))
      .def("__hash__", [](const DLDevice& d) { return nb::hash(device_tuple(d)); })
      .def(
          "__iter__",
          [](const DLDevice& d) {
            warn_deprecated(kDeviceTupleDeprecated);
            return nb::iter(device_tuple(d));
          },
          nb::sig("def __iter__(self) -> typing.Iterator[int]"),
          "Deprecated: unpacks as the old (device_type, device_id) tuple.")
      .def(
          "__getitem__",
          [](const DLDevice& d, nb::handle index) {
            warn_deprecated(kDeviceTupleDeprecated);
            return device_tuple(d).attr("__getitem__")(index);
          },
          nb::sig("def __getitem__(self, index: int, /) -> int"),
          "Deprecated: indexes the old (device_type, device_id) tuple.")
      .def("__len__", [](const DLDevice&) { return 2; });
}

void bind_dtype(nb::module_& module) {
  auto type =
      nb::class_<DLDataType>(module, "DLDataType",
                             "A DLPack data type: a scalar type code, a bits width and a lanes "
                             "count.")
          .def(nb::init<std::uint8_t, std::uint8_t, std::uint16_t>(), nb::arg("code"),
               nb::arg("bits"), nb::arg("lanes"))
          .def_rw("code", &DLDataType::code, "Scalar type code (int; see DLDataTypeCode).")
          .def_rw("bits", &DLDataType::bits, "Bit width of a single scalar.")
          .def_rw("lanes", &DLDataType::lanes, "Number of lanes (> 1 for vector types).")
          .def("__repr__", &dtype_repr)
          .def("__eq__", &dtype_equals, nb::arg("other").none(),
               nb::sig("def __eq__(self, other: object, /) -> bool"))
          // By value, as __eq__ compares (a key of sets and dicts, as in Holoscan 5.0); a dtype
          // changed while it is a key is no longer found under its new value.
          .def("__hash__", [](const DLDataType& d) { return nb::hash(dtype_tuple(d)); });
}

}  // namespace

nb::object device_type_object(int value) {
  if (known_device_type(value)) {
    return nb::cast(static_cast<DeviceTypeCode>(value));
  }
  return nb::int_(value);
}

// Holoscan 5.0's spellings (its module, run): the C++ enumerator for a device type (kDLCPU), the
// Python member for a type code (DLFLOAT); a value neither names is written as its number.
std::string device_repr(DLDevice device) {
  const int type = static_cast<int>(device.device_type);
  const char* name = device_type_name(type);
  return "DLDevice(device_type=" +
         (name != nullptr ? "k" + std::string(name) : std::to_string(type)) +
         ", device_id=" + std::to_string(device.device_id) + ")";
}

std::string dtype_repr(DLDataType dtype) {
  const char* code = type_code_name(dtype.code);
  return "DLDataType(code=" + (code != nullptr ? std::string(code) : std::to_string(dtype.code)) +
         ", bits=" + std::to_string(dtype.bits) + ", lanes=" + std::to_string(dtype.lanes) + ")";
}

namespace {

// Any sequence of two integers is a device, as Holoscan 5.0's std::optional<std::tuple<int, int>>
// dl_device parameter reads it (a list too).
DLDevice read_device(nb::handle device, const char* what, Bools bools) {
  if (nb::isinstance<DLDevice>(device)) {
    return nb::cast<DLDevice>(device);
  }
  if (const auto pair = sequence_pair(device)) {
    if (bools == Bools::kRefused) {
      refuse_bool(pair->first.handle(), [&] { return std::string(what) + "[0]"; });
      refuse_bool(pair->second.handle(), [&] { return std::string(what) + "[1]"; });
    }
    const auto type = integer_argument<std::int32_t>(pair->first.handle(),
                                                     [&] { return std::string(what) + "[0]"; });
    const auto id = integer_argument<std::int32_t>(pair->second.handle(),
                                                   [&] { return std::string(what) + "[1]"; });
    if (!type || !id) {
      raise_invalid_argument(std::string(what) + " " + display_text(device) +
                             " is not a device: its values are 32-bit");
    }
    return DLDevice{static_cast<DLDeviceType>(*type), *id};
  }
  throw nb::type_error(
      (std::string(what) + " must be a (device_type, device_id) pair or a DLDevice").c_str());
}

}  // namespace

DLDevice parse_device(nb::handle device, const char* what, Bools bools) {
  const DLDevice parsed = read_device(device, what, bools);
  if (parsed.device_id < 0) {  // no device has one (an export refuses a view that says so)
    raise_invalid_argument(std::string(what) + " " + display_text(device) +
                           " is not a device: its id is negative");
  }
  return parsed;
}

void bind_dl_types(nb::module_& module) {
  bind_device(module);
  bind_dtype(module);
}

}  // namespace holoscan::python
