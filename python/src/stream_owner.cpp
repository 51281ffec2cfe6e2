// Looks only into modules already loaded: a consumer that passed a CuPy stream has CuPy loaded.
#include "stream_owner.hpp"

#include <cstdint>

#include "raised_exception.hpp"
#include "without_gil.hpp"

namespace holoscan::python {
namespace {

// `object.ptr` as a handle, or null: an ordinary failure cleared, an interruption left raised
// (clear_ordinary_error). A property and an __index__ are Python code, run by this thread: see
// running_python.
cudaStream_t pointer_of(PyObject* object) noexcept {
  PyObject* ptr = running_python([&] { return PyObject_GetAttrString(object, "ptr"); });
  if (ptr == nullptr) {
    (void)clear_ordinary_error();
    return nullptr;
  }
  const auto value = running_python([&] { return PyLong_AsUnsignedLongLong(ptr); });
  running_python([&] {  // the last reference: a __del__ would be Python code
    Py_DECREF(ptr);
    return 0;
  });
  if (PyErr_Occurred() != nullptr) {
    (void)clear_ordinary_error();
    return nullptr;
  }
  return reinterpret_cast<cudaStream_t>(static_cast<std::uintptr_t>(value));
}

// CuPy's current stream object (a new reference), or null (an interruption left raised).
PyObject* cupy_current_stream() noexcept {
  PyObject* modules = PyImport_GetModuleDict();                 // borrowed
  PyObject* cuda = PyDict_GetItemString(modules, "cupy.cuda");  // borrowed; null: not loaded
  if (cuda == nullptr) {
    return nullptr;
  }
  PyObject* stream =
      running_python([&] { return PyObject_CallMethod(cuda, "get_current_stream", nullptr); });
  if (stream == nullptr) {
    (void)clear_ordinary_error();
  }
  return stream;
}

}  // namespace

PyObject* find_stream_owner(cudaStream_t handle) noexcept {
  PyObject* stream = cupy_current_stream();
  if (stream != nullptr && pointer_of(stream) == handle && PyErr_Occurred() == nullptr) {
    return stream;
  }
  // An interruption raised above is kept aside while the finalizer runs, and raised again.
  HeldReference interruption = take_raised_exception();
  running_python([&] {  // possibly the last reference: its finalizer may be Python code
    Py_XDECREF(stream);
    return 0;
  });
  restore_raised_exception(std::move(interruption));
  return nullptr;
}

}  // namespace holoscan::python
