#include "dtype.hpp"

#include <nanobind/stl/string.h>

#include <cstring>
#include <string>

#include <holoscan/dlpack_utils.hpp>

#include "cast_arg.hpp"
#include "errors.hpp"
#include "held_reference.hpp"
#include "without_gil.hpp"

namespace nb = nanobind;

namespace holoscan::python {
namespace {

// DLDataTypeCode values by number, so that the names do not depend on the dlpack.h in use.
struct NamedType {
  const char* name;  // with the bits for the families that have several widths
  std::uint8_t code;
  std::uint8_t bits;
};

constexpr NamedType kNamedTypes[] = {
    {"bool", 6, 8},
    {"int8", 0, 8},
    {"int16", 0, 16},
    {"int32", 0, 32},
    {"int64", 0, 64},
    {"uint8", 1, 8},
    {"uint16", 1, 16},
    {"uint32", 1, 32},
    {"uint64", 1, 64},
    {"float16", 2, 16},
    {"float32", 2, 32},
    {"float64", 2, 64},
    {"bfloat16", 4, 16},
    {"complex64", 5, 64},
    {"complex128", 5, 128},
    {"float8_e3m4", 7, 8},
    {"float8_e4m3", 8, 8},
    {"float8_e4m3b11fnuz", 9, 8},
    {"float8_e4m3fn", 10, 8},
    {"float8_e4m3fnuz", 11, 8},
    {"float8_e5m2", 12, 8},
    {"float8_e5m2fnuz", 13, 8},
    {"float8_e8m0fnu", 14, 8},
    {"float6_e2m3fn", 15, 6},
    {"float6_e3m2fn", 16, 6},
    {"float4_e2m1fn", 17, 4},
};

DLDataType dtype_from_tuple(nb::handle dtype) {
  const auto items = nb::cast<nb::tuple>(dtype);
  if (items.size() != 3) {
    raise_invalid_argument("a dtype tuple is (code, bits, lanes)");
  }
  refuse_bool(items[0], "a dtype tuple's code");
  refuse_bool(items[1], "a dtype tuple's bits");
  refuse_bool(items[2], "a dtype tuple's lanes");
  const auto code = integer_argument<std::uint8_t>(items[0], "a dtype tuple's code");
  const auto bits = integer_argument<std::uint8_t>(items[1], "a dtype tuple's bits");
  const auto lanes = integer_argument<std::uint16_t>(items[2], "a dtype tuple's lanes");
  if (!code || !bits || !lanes) {
    raise_invalid_argument("a dtype tuple's code and bits must fit 8 bits and lanes 16 bits");
  }
  return DLDataType{*code, *bits, *lanes};
}

DLDataType dtype_from_string(const std::string& text) {
  for (const NamedType& named : kNamedTypes) {
    if (text == named.name) {
      return DLDataType{named.code, named.bits, 1};
    }
  }
  auto parsed = dldatatype_from_typestr(text);
  if (!parsed) {
    raise_error(parsed.error());
  }
  return *parsed;
}

}  // namespace

std::string dtype_string(DLDataType dtype) {
  // numpy_dtype names one lane: a vector type is named below, with its lanes.
  if (dtype.lanes == 1) {
    if (auto typestr = numpy_dtype(dtype)) {
      return *typestr;
    }
  }
  std::string name;
  for (const NamedType& named : kNamedTypes) {
    if (named.code == dtype.code && named.bits == dtype.bits) {
      name = named.name;
      break;
    }
  }
  if (name.empty()) {
    name = "dl" + std::to_string(dtype.code) + "_" + std::to_string(dtype.bits);
  }
  if (dtype.lanes != 1) {
    name += "x" + std::to_string(dtype.lanes);
  }
  return name;
}

DLDataType parse_dtype(nb::handle dtype) {
  if (nb::isinstance<DLDataType>(dtype)) {
    return nb::cast<DLDataType>(dtype);
  }
  if (nb::isinstance<nb::str>(dtype)) {
    const std::optional<std::string> text = utf8_text(dtype);
    if (!text) {  // a lone surrogate: no name or type string has one
      raise_invalid_argument("dtype " + display_text(nb::repr(dtype)) + " names no type");
    }
    return dtype_from_string(*text);
  }
  if (nb::isinstance<nb::tuple>(dtype)) {
    return dtype_from_tuple(dtype);
  }
  // numpy.dtype. Read once; none to read (AttributeError, as hasattr() reads it) is no dtype,
  // and anything else its lookup raised (a KeyboardInterrupt in a property) is the caller's.
  const HeldReference str = attribute_if_any(dtype, "str");
  if (str.is_valid()) {
    return dtype_from_string(cast_or_type_error<std::string>(
        nb::handle(str.get()), "dtype.str must be a string, such as NumPy's '<f4'"));
  }
  throw nb::type_error(
      "dtype must be a DLDataType, a NumPy type string ('<f4'), a name ('float32'), a "
      "numpy.dtype or a (code, bits, lanes) tuple");
}

}  // namespace holoscan::python
