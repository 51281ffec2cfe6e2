#include "errors.hpp"

#include <Python.h>

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <array>
#include <memory>
#include <utility>

#include "without_gil.hpp"

namespace nb = nanobind;

namespace holoscan::python {

namespace {

// holoscan_dlpack.errors' class of each code (references kept for the life of the process, as the
// module keeps them), looked up once under the GIL; HoloscanError for a code without a class.
struct ErrorClasses {
  std::array<PyObject*, 256> by_code{};
  PyObject* base = nullptr;
};

const ErrorClasses& error_classes() {
  static ErrorClasses* classes = nullptr;
  if (classes != nullptr) {
    return *classes;
  }
  // The classes live in Python (holoscan_dlpack/errors.py), so that users subclass and catch
  // ordinary Python exceptions; an ImportError here would itself propagate, never a lost failure.
  const nb::module_ errors = nb::module_::import_("holoscan_dlpack.errors");
  auto made = std::make_unique<ErrorClasses>();
  made->base = errors.attr("HoloscanError").inc_ref().ptr();
  const nb::dict by_code = nb::borrow<nb::dict>(errors.attr("_BY_CODE"));
  for (const auto& [code, type] : by_code) {
    const long value = PyLong_AsLong(code.ptr());  // an ErrorCode: an int
    if (value >= 0 && value < static_cast<long>(made->by_code.size())) {
      made->by_code[static_cast<std::size_t>(value)] = type.inc_ref().ptr();
    }
  }
  PyErr_Clear();
  classes = made.release();  // kept for the life of the process, with the classes
  return *classes;
}

}  // namespace

nb::object exception_for(const Error& error) {
  // Built as errors._exception_for and HoloscanError.__init__ build it (args, code, token), but
  // without running Python code: a thread that runs bytecode may give the GIL away, and a daemon
  // thread that takes it back once finalization has begun is ended there by CPython before 3.14
  // (pthread_exit()), whose forced unwinding through the C++ frames below aborts the process or
  // drops references without the GIL. The code's member comes from nanobind's table, its name
  // from the member's own `_name_`, the instance from the class's tp_new, and no __init__ runs.
  const ErrorClasses& classes = error_classes();
  const auto value = static_cast<std::size_t>(error.code);
  PyObject* type = value < classes.by_code.size() ? classes.by_code[value] : nullptr;
  nb::object member;
  try {
    member = nb::cast(error.code);
  } catch (const nb::cast_error&) {  // outside ErrorCode: still a HoloscanError, code FAILURE
    PyErr_Clear();  // nanobind set a ValueError before it threw: no call below may see one set
    member = nb::cast(ErrorCode::kFailure);
    type = nullptr;
  }
  if (type == nullptr) {
    type = classes.base;  // HoloscanError(message, code=...), as _exception_for gives
  }
  const nb::tuple args = nb::make_tuple(message_text(to_string(error)));
  auto* exception_type = reinterpret_cast<PyTypeObject*>(type);
  nb::object exception = nb::steal(exception_type->tp_new(exception_type, args.ptr(), nullptr));
  if (!exception.is_valid()) {
    throw nb::python_error();
  }
  exception.attr("code") = member;
  exception.attr("token") = member.attr("_name_");
  return exception;
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
  // stacklevel 1 from C code names the Python line that called us. A warning may run Python code
  // (filters, a showwarning of logging's or a test runner's): see running_python.
  if (running_python([&] { return PyErr_WarnEx(PyExc_DeprecationWarning, message, 1); }) != 0) {
    throw nb::python_error();
  }
}

ErrorIndicatorGuard::ErrorIndicatorGuard() noexcept : saved_(take_raised_exception()) {}

ErrorIndicatorGuard::~ErrorIndicatorGuard() {
  // Whatever a release raised is not the caller's business: report it, keep the caller's.
  if (PyErr_Occurred() != nullptr) {
    // sys.unraisablehook and its writes are Python code, run from a destructor: see
    // running_python.
    running_python([] { PyErr_WriteUnraisable(nullptr); });
  }
  restore_raised_exception(std::move(saved_));
}

}  // namespace holoscan::python
