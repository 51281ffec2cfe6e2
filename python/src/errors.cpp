#include "errors.hpp"

#include <Python.h>

#include <nanobind/nanobind.h>

#include <stdexcept>

namespace nb = nanobind;

namespace holoscan::python {

void raise_error(const Error& error, Raise kind) {
  const std::string text = to_string(error);
  if (kind == Raise::kBuffer) {
    throw nb::buffer_error(text.c_str());
  }
  if (error.code == ErrorCode::kInvalidArgument) {
    throw nb::value_error(text.c_str());
  }
  throw std::runtime_error(text);
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
