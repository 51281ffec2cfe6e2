#pragma once
// Python text as C++ text for messages and names. Text need not have a UTF-8 form (a lone
// surrogate), and nanobind's str::c_str() is null for such text, which a std::string cannot be
// made from: these never fail on it.
#include <Python.h>

#include <nanobind/nanobind.h>

#include <cstring>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>

#include "raised_exception.hpp"
#include "without_gil.hpp"

namespace holoscan::python {

/** @brief The UTF-8 of `text`, a str, or nothing where it has none (a lone surrogate). */
inline std::optional<std::string> utf8_text(nanobind::handle text) {
  Py_ssize_t size = 0;
  const char* utf8 = PyUnicode_AsUTF8AndSize(text.ptr(), &size);
  if (utf8 == nullptr) {
    PyErr_Clear();
    return std::nullopt;
  }
  return std::string(utf8, static_cast<std::size_t>(size));
}

/**
 * @brief The name of `value`'s type for a message ("module.Name"), as UTF-8; the type's own C
 *        name where the module's name has no UTF-8 (a lone surrogate set as `__module__`).
 */
inline std::string type_text(nanobind::handle value) {
  const char* c_name = Py_TYPE(value.ptr())->tp_name;
  if (std::strchr(c_name, '.') != nullptr) {
    return c_name;  // an extension's type names its module ("numpy.bool", not a bare "bool")
  }
  std::optional<std::string> name = utf8_text(nanobind::type_name(value.type()));
  return name ? std::move(*name) : std::string(Py_TYPE(value.ptr())->tp_name);
}

/**
 * @brief str(value) for a message, as UTF-8; its ascii() where str() raises or gives text that
 *        UTF-8 cannot hold (a lone surrogate). Leaves no error set (nanobind's str::c_str() is
 *        null there, which a std::string cannot be made from); raises only what
 *        clear_ordinary_error() keeps (a KeyboardInterrupt inside a __str__).
 */
inline std::string display_text(nanobind::handle value) {
  for (PyObject* (*render)(PyObject*) : {&PyObject_Str, &PyObject_ASCII}) {
    // A __str__ or __repr__ is Python code, run by this thread: see running_python.
    nanobind::object text = nanobind::steal(running_python([&] { return render(value.ptr()); }));
    if (!text.is_valid()) {
      if (!clear_ordinary_error()) {
        throw nanobind::python_error();  // an interruption while the message was being made
      }
      continue;
    }
    if (std::optional<std::string> utf8 = utf8_text(text)) {
      return std::move(*utf8);
    }
  }
  return std::string("<") + Py_TYPE(value.ptr())->tp_name + " object>";
}

}  // namespace holoscan::python
