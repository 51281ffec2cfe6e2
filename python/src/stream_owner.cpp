// Looks only into modules already loaded: a consumer that passed a CuPy stream has CuPy loaded.
#include "stream_owner.hpp"

#include <cstdint>

#include "without_gil.hpp"

namespace holoscan::python {
namespace {

// `object.ptr` as a handle, or null (the error cleared). A property and an __index__ are Python
// code, run by this thread: see running_python.
cudaStream_t pointer_of(PyObject* object) noexcept {
  PyObject* ptr = running_python([&] { return PyObject_GetAttrString(object, "ptr"); });
  if (ptr == nullptr) {
    PyErr_Clear();
    return nullptr;
  }
  const auto value = running_python([&] { return PyLong_AsUnsignedLongLong(ptr); });
  running_python([&] {  // the last reference: a __del__ would be Python code
    Py_DECREF(ptr);
    return 0;
  });
  if (PyErr_Occurred() != nullptr) {
    PyErr_Clear();
    return nullptr;
  }
  return reinterpret_cast<cudaStream_t>(static_cast<std::uintptr_t>(value));
}

// CuPy's current stream object (a new reference), or null.
PyObject* cupy_current_stream() noexcept {
  PyObject* modules = PyImport_GetModuleDict();                 // borrowed
  PyObject* cuda = PyDict_GetItemString(modules, "cupy.cuda");  // borrowed; null: not loaded
  if (cuda == nullptr) {
    return nullptr;
  }
  PyObject* stream =
      running_python([&] { return PyObject_CallMethod(cuda, "get_current_stream", nullptr); });
  if (stream == nullptr) {
    PyErr_Clear();
  }
  return stream;
}

}  // namespace

PyObject* find_stream_owner(cudaStream_t handle) noexcept {
  PyObject* stream = cupy_current_stream();
  if (stream != nullptr && pointer_of(stream) == handle) {
    return stream;
  }
  running_python([&] {  // possibly the last reference: its finalizer may be Python code
    Py_XDECREF(stream);
    return 0;
  });
  return nullptr;
}

}  // namespace holoscan::python
