#include "dlpack_fastcall.hpp"

#include <Python.h>

#include <array>
#include <exception>
#include <new>

#include "errors.hpp"
#include "exports.hpp"
#include "python_release.hpp"

namespace nb = nanobind;

namespace holoscan::python {
namespace {

constexpr std::array<const char*, 4> kNames = {"stream", "max_version", "dl_device", "copy"};

// Interned once (the module lives as long as the interpreter); Python interns the keyword names
// of a call's source, so an identity test finds them without comparing characters.
std::array<PyObject*, kNames.size()> interned_names{};

// The slot of keyword `name`, or -1 for a name __dlpack__ does not take.
int slot_of(PyObject* name) noexcept {
  for (std::size_t i = 0; i < kNames.size(); ++i) {
    if (name == interned_names[i]) {
      return static_cast<int>(i);
    }
  }
  for (std::size_t i = 0; i < kNames.size(); ++i) {
    if (PyUnicode_Check(name) && PyUnicode_CompareWithASCIIString(name, kNames[i]) == 0) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

// What nanobind's dispatcher would raise for a C++ exception escaping export_dlpack.
void set_python_error(const nb::builtin_exception& error) noexcept {
  PyObject* type = PyExc_RuntimeError;
  switch (error.type()) {
    case nb::exception_type::type_error:
      type = PyExc_TypeError;
      break;
    case nb::exception_type::value_error:
      type = PyExc_ValueError;
      break;
    case nb::exception_type::buffer_error:
      type = PyExc_BufferError;
      break;
    case nb::exception_type::index_error:
      type = PyExc_IndexError;
      break;
    case nb::exception_type::key_error:
      type = PyExc_KeyError;
      break;
    case nb::exception_type::attribute_error:
      type = PyExc_AttributeError;
      break;
    default:
      break;
  }
  set_error_text(type, error.what());
}

PyObject* dlpack_method(PyObject* self, PyObject* const* args, Py_ssize_t positional,
                        PyObject* keyword_names) noexcept {
  if (positional != 0) {
    PyErr_Format(PyExc_TypeError,
                 "__dlpack__() takes no positional arguments (stream, max_version, dl_device and "
                 "copy are keyword-only), %zd given",
                 positional);
    return nullptr;
  }
  std::array<PyObject*, kNames.size()> values = {Py_None, Py_None, Py_None, Py_None};
  std::array<bool, kNames.size()> given{};
  const Py_ssize_t keywords = keyword_names != nullptr ? PyTuple_GET_SIZE(keyword_names) : 0;
  for (Py_ssize_t i = 0; i < keywords; ++i) {
    PyObject* name = PyTuple_GET_ITEM(keyword_names, i);
    const int slot = slot_of(name);
    if (slot < 0) {
      PyErr_Format(PyExc_TypeError, "__dlpack__() got an unexpected keyword argument '%S'", name);
      return nullptr;
    }
    if (given[static_cast<std::size_t>(slot)]) {
      PyErr_Format(PyExc_TypeError, "__dlpack__() got multiple values for argument '%s'",
                   kNames[static_cast<std::size_t>(slot)]);
      return nullptr;
    }
    given[static_cast<std::size_t>(slot)] = true;
    values[static_cast<std::size_t>(slot)] = args[i];
  }
  // The method descriptor has checked that `self` is a Tensor; it may still be one whose
  // construction failed.
  if (!nb::inst_ready(self)) {
    PyErr_SetString(PyExc_TypeError, "__dlpack__(): the Tensor was never initialized");
    return nullptr;
  }
  try {
    ModuleEntry entry;  // what every bound function does on entry
    Tensor& tensor = *nb::inst_ptr<Tensor>(self);
    return export_dlpack(tensor, values[0], values[1], values[2], values[3]).release().ptr();
  } catch (nb::python_error& error) {
    error.restore();
  } catch (const nb::builtin_exception& error) {
    set_python_error(error);
  } catch (const std::bad_alloc&) {
    PyErr_NoMemory();
  } catch (const std::exception& error) {
    set_error_text(PyExc_RuntimeError, error.what());
  } catch (...) {
    PyErr_SetString(PyExc_RuntimeError, "__dlpack__(): unknown C++ exception");
  }
  return nullptr;
}

PyMethodDef dlpack_method_def = {
    "__dlpack__", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&dlpack_method)),
    METH_FASTCALL | METH_KEYWORDS,
    "__dlpack__($self, /, *, stream=None, max_version=None, dl_device=None, copy=None)\n--\n\n"
    "Exports a DLPack capsule, then orders `stream` after readiness: None/1 legacy default, 2 "
    "per-thread default, -1 no synchronization, a stream pointer, or an object with "
    "__cuda_stream__(); 0 is invalid; checked but not waited on for host tensors (CPU, pinned) "
    "unless copied into device memory. max_version and dl_device are tuples of two "
    "(ValueError else). A read-only tensor needs "
    "max_version >= (1, 0) (BufferError else). copy=True or another dl_device gives an owning, "
    "writable copy, made on `stream` after the readiness point (-1 is refused when device "
    "memory is copied)."};

}  // namespace

void bind_dlpack_method(nb::class_<Tensor>& type) {
  for (std::size_t i = 0; i < kNames.size(); ++i) {
    interned_names[i] = PyUnicode_InternFromString(kNames[i]);
    if (interned_names[i] == nullptr) {
      throw nb::python_error();
    }
  }
  nb::object method =
      nb::steal(PyDescr_NewMethod(reinterpret_cast<PyTypeObject*>(type.ptr()), &dlpack_method_def));
  if (!method.is_valid()) {
    throw nb::python_error();
  }
  nb::setattr(type, "__dlpack__", method);
}

}  // namespace holoscan::python
