// The IntEnums of Holoscan 5.0's Python API: DLDeviceType and DLDataTypeCode (holoscan.tensor)
// and ErrorCode (holoscan.errors), spelled as 5.0 spells them.
#include <nanobind/nanobind.h>

#include <cctype>
#include <string>
#include <string_view>
#include <vector>

#include <holoscan/errors.hpp>

#include "bindings.hpp"
#include "dl_types.hpp"

namespace nb = nanobind;

namespace holoscan::python {
namespace {

struct NamedValue {
  const char* name;
  int value;
};

// By number, so that the names do not depend on the dlpack.h in use (1.0 lacks the newer ones).
constexpr NamedValue kDeviceTypes[] = {
    {"DLCPU", 1},       {"DLCUDA", 2},     {"DLCUDAHOST", 3},     {"DLOPENCL", 4},
    {"DLVULKAN", 7},    {"DLMETAL", 8},    {"DLVPI", 9},          {"DLROCM", 10},
    {"DLROCMHOST", 11}, {"DLEXTDEV", 12},  {"DLCUDAMANAGED", 13}, {"DLONEAPI", 14},
    {"DLWEBGPU", 15},   {"DLHEXAGON", 16}, {"DLMAIA", 17},        {"DLTRN", 18},
};

constexpr NamedValue kTypeCodes[] = {
    {"DLINT", 0},
    {"DLUINT", 1},
    {"DLFLOAT", 2},
    {"DLOPAQUEHANDLE", 3},
    {"DLBFLOAT", 4},
    {"DLCOMPLEX", 5},
    {"DLBOOL", 6},
    {"DLFLOAT8_E3M4", 7},
    {"DLFLOAT8_E4M3", 8},
    {"DLFLOAT8_E4M3B11FNUZ", 9},
    {"DLFLOAT8_E4M3FN", 10},
    {"DLFLOAT8_E4M3FNUZ", 11},
    {"DLFLOAT8_E5M2", 12},
    {"DLFLOAT8_E5M2FNUZ", 13},
    {"DLFLOAT8_E8M0FNU", 14},
    {"DLFLOAT6_E2M3FN", 15},
    {"DLFLOAT6_E3M2FN", 16},
    {"DLFLOAT4_E2M1FN", 17},
};

// Python's spelling of a C++ enumerator name: "kInvalidArgument" -> "INVALID_ARGUMENT".
std::string python_code_name(std::string_view cpp_name) {
  std::string name;
  for (std::size_t i = 1; i < cpp_name.size(); ++i) {
    const char c = cpp_name[i];
    if (i > 1 && std::isupper(static_cast<unsigned char>(c)) != 0) {
      name += '_';
    }
    name += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  return name;
}

template <class Enum>
void add_values(nb::enum_<Enum>& type, const NamedValue* values, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) {
    type.value(values[i].name, static_cast<Enum>(values[i].value));
  }
}

}  // namespace

namespace {

template <std::size_t N>
const char* name_in(const NamedValue (&table)[N], int value) noexcept {
  for (const NamedValue& named : table) {
    if (named.value == value) {
      return named.name;
    }
  }
  return nullptr;
}

}  // namespace

const char* device_type_name(int value) noexcept { return name_in(kDeviceTypes, value); }

const char* type_code_name(int value) noexcept { return name_in(kTypeCodes, value); }

bool known_device_type(int value) noexcept { return device_type_name(value) != nullptr; }

void bind_enums(nb::module_& module) {
  nb::enum_<DeviceTypeCode> device_types(module, "DLDeviceType", nb::is_arithmetic(),
                                         "DLPack device type (holoscan.tensor.DLDeviceType).");
  add_values(device_types, kDeviceTypes, std::size(kDeviceTypes));

  nb::enum_<TypeCode> type_codes(module, "DLDataTypeCode", nb::is_arithmetic(),
                                 "DLPack scalar type code (holoscan.tensor.DLDataTypeCode).");
  add_values(type_codes, kTypeCodes, std::size(kTypeCodes));

  // Every C++ code, named from error_code_name: the two tables cannot drift apart.
  nb::enum_<ErrorCode> codes(module, "ErrorCode", nb::is_arithmetic(),
                             "Stable error category (holoscan.errors.ErrorCode).");
  static auto* names = new std::vector<std::string>();  // nanobind keeps the name pointers
  for (int value = 0;; ++value) {
    const std::string_view cpp_name = error_code_name(static_cast<ErrorCode>(value));
    if (cpp_name == "unknown") {
      break;
    }
    names->push_back(python_code_name(cpp_name));
  }
  for (std::size_t value = 0; value < names->size(); ++value) {
    codes.value((*names)[value].c_str(), static_cast<ErrorCode>(value));
  }
}

}  // namespace holoscan::python
