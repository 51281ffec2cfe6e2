#include "raised_exception.hpp"

namespace holoscan::python {

HeldReference take_raised_exception() noexcept {
#if PY_VERSION_HEX >= 0x030C0000
  return HeldReference(PyErr_GetRaisedException());
#else
  PyObject* type = nullptr;
  PyObject* value = nullptr;
  PyObject* traceback = nullptr;
  PyErr_Fetch(&type, &value, &traceback);
  PyErr_NormalizeException(&type, &value, &traceback);
  if (value != nullptr && traceback != nullptr) {
    (void)PyException_SetTraceback(value, traceback);
  }
  Py_XDECREF(type);
  Py_XDECREF(traceback);
  return HeldReference(value);
#endif
}

void restore_raised_exception(HeldReference exception) noexcept {
  PyObject* value = exception.release();
#if PY_VERSION_HEX >= 0x030C0000
  PyErr_SetRaisedException(value);  // steals the reference
#else
  if (value == nullptr) {
    PyErr_Clear();
    return;
  }
  PyObject* type = reinterpret_cast<PyObject*>(Py_TYPE(value));
  Py_INCREF(type);
  PyErr_Restore(type, value, PyException_GetTraceback(value));  // steals all three
#endif
}

bool clear_ordinary_error() noexcept {
  if (PyErr_ExceptionMatches(PyExc_Exception) == 0 ||
      PyErr_ExceptionMatches(PyExc_MemoryError) != 0) {
    return false;
  }
  PyErr_Clear();
  return true;
}

}  // namespace holoscan::python
