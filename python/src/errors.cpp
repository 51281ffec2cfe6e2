#include "errors.hpp"

#include <Python.h>

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

namespace nb = nanobind;

namespace holoscan::python {

nb::object exception_for(const Error& error) {
  // The classes live in Python (holoscan_dlpack/errors.py), so that users subclass and catch
  // ordinary Python exceptions; an ImportError here would itself propagate, never a lost failure.
  return nb::module_::import_("holoscan_dlpack.errors")
      .attr("_exception_for")(static_cast<int>(error.code), message_text(to_string(error)));
}

namespace {

// Python text of a library message: bytes that are not UTF-8 (a refusal naming part of a
// character) are escaped, never a UnicodeDecodeError; null out of memory, with that error set.
PyObject* decode_message(std::string_view text) noexcept {
  return PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()),
                              "backslashreplace");
}

}  // namespace

nb::str message_text(std::string_view text) {
  PyObject* decoded = decode_message(text);
  if (decoded == nullptr) {
    throw nb::python_error();  // out of memory
  }
  return nb::steal<nb::str>(decoded);
}

void set_error_text(PyObject* type, std::string_view text) noexcept {
  PyObject* decoded = decode_message(text);
  if (decoded == nullptr) {
    return;  // out of memory: that error is set instead
  }
  PyErr_SetObject(type, decoded);
  Py_DECREF(decoded);
}

void raise_error(const Error& error, Raise kind) {
  if (kind == Raise::kBuffer) {
    set_error_text(PyExc_BufferError, to_string(error));
    throw nb::python_error();
  }
  nb::object exception = exception_for(error);
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exception.ptr())), exception.ptr());
  throw nb::python_error();
}

void raise_invalid_argument(const std::string& message) {
  raise_error(Error{ErrorCode::kInvalidArgument, message});
}

void warn_deprecated(const char* message) {
  // stacklevel 1 from C code names the Python line that called us.
  if (PyErr_WarnEx(PyExc_DeprecationWarning, message, 1) != 0) {
    throw nb::python_error();
  }
}

ErrorIndicatorGuard::ErrorIndicatorGuard() noexcept {
#if PY_VERSION_HEX >= 0x030C0000
  saved_[0] = PyErr_GetRaisedException();
#else
  PyErr_Fetch(reinterpret_cast<PyObject**>(&saved_[0]), reinterpret_cast<PyObject**>(&saved_[1]),
              reinterpret_cast<PyObject**>(&saved_[2]));
#endif
}

ErrorIndicatorGuard::~ErrorIndicatorGuard() {
  // Whatever a release raised is not the caller's business: report it, keep the caller's.
  if (PyErr_Occurred() != nullptr) {
    PyErr_WriteUnraisable(nullptr);
  }
#if PY_VERSION_HEX >= 0x030C0000
  PyErr_SetRaisedException(static_cast<PyObject*>(saved_[0]));
#else
  PyErr_Restore(static_cast<PyObject*>(saved_[0]), static_cast<PyObject*>(saved_[1]),
                static_cast<PyObject*>(saved_[2]));
#endif
}

}  // namespace holoscan::python
