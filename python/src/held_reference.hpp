#pragma once
// A strong reference that the extension's C++ frames hold to a producer's object, let go of under
// running_python on every way out of the frame, an exception's unwinding included: dropping it may
// run Python code (a capsule's destructor runs the producer's deleter, an object's __del__), which
// may give the GIL away; nanobind's nb::object would drop it from its noexcept destructor, where a
// daemon thread that CPython ends during finalization aborts the process.
#include <Python.h>

#include <nanobind/nanobind.h>

#include <utility>

#include "without_gil.hpp"

namespace holoscan::python {

/** @brief Owns one strong reference (or none), dropped under running_python. */
class HeldReference {
 public:
  /** @brief Takes over `object`'s new reference (null: holds none). */
  explicit HeldReference(PyObject* object) noexcept : object_(object) {}
  /** @brief Drops the reference under running_python. */
  ~HeldReference() { reset(nullptr); }
  HeldReference(const HeldReference&) = delete;
  HeldReference& operator=(const HeldReference&) = delete;
  /** @brief Takes over `other`'s reference, which then holds none. */
  HeldReference(HeldReference&& other) noexcept : object_(std::exchange(other.object_, nullptr)) {}
  HeldReference& operator=(HeldReference&&) = delete;

  /** @brief The object (borrowed), or null. */
  PyObject* get() const noexcept { return object_; }
  /** @brief The object as nanobind's borrowed handle (invalid when none is held). */
  nanobind::handle handle() const noexcept { return nanobind::handle(object_); }
  /** @brief Whether a reference is held. */
  bool is_valid() const noexcept { return object_ != nullptr; }
  /** @brief The reference held, handed to the caller (this then holds none). */
  PyObject* release() noexcept { return std::exchange(object_, nullptr); }
  /** @brief Drops the reference held (under running_python) and takes over `object`'s. */
  void reset(PyObject* object) noexcept {
    if (PyObject* old = std::exchange(object_, object); old != nullptr) {
      running_python([old] { Py_DECREF(old); });  // not noexcept: see running_python
    }
  }

 private:
  PyObject* object_;
};

}  // namespace holoscan::python
