#pragma once
// Python values read as C++ ones with an error that names the argument: a failed nb::cast
// escapes a bound function as RuntimeError "std::bad_cast", which says neither what was wrong nor
// where. Names and messages may be given as text or as a callable that makes the text: imports
// and stream arguments are hot, and a name is only needed on failure.
#include <Python.h>

#include <nanobind/nanobind.h>

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "errors.hpp"
#include "held_reference.hpp"
#include "text_arg.hpp"
#include "without_gil.hpp"

namespace holoscan::python {

/** @brief `text` itself, or what the callable `text` makes: built only where an error needs it. */
template <typename Text>
std::string describe(const Text& text) {
  if constexpr (std::is_invocable_v<const Text&>) {
    return text();
  } else {
    return std::string(text);
  }
}

/**
 * @brief `value`'s __index__() as an int where it is no int but has one; `value` itself otherwise;
 *        invalid where that __index__ raised TypeError or OverflowError (cleared, as nanobind's
 *        casters clear them); any other exception it raised propagates.
 *        An __index__ is Python code, run by this thread: nanobind's integer caster runs it from a
 *        noexcept function, where a thread ended at exit aborts the process; here it is a C call
 *        under running_python, and that caster then reads an int.
 */
inline nanobind::object index_value(nanobind::handle value) {
  PyObject* object = value.ptr();
  if (PyLong_Check(object) || PyIndex_Check(object) == 0) {
    return nanobind::borrow(value);
  }
  nanobind::object index = nanobind::steal(running_python([&] { return PyNumber_Index(object); }));
  if (!index.is_valid()) {
    // Only the refusals a caster makes itself are cleared; anything else the __index__ raised
    // (KeyboardInterrupt, its own error) is the caller's to see.
    if (PyErr_ExceptionMatches(PyExc_TypeError) == 0 &&
        PyErr_ExceptionMatches(PyExc_OverflowError) == 0) {
      throw nanobind::python_error();
    }
    PyErr_Clear();
  }
  return index;
}

/**
 * @brief The attribute `name` of `object`, or no reference when it has none (AttributeError).
 *        Any other exception its lookup raised (a property's, a proxy's __getattr__: Python code,
 *        run by this thread, see running_python; KeyboardInterrupt among them) propagates, which
 *        PyObject_HasAttrString would swallow. Read once: a property may build its value anew.
 */
inline HeldReference attribute_if_any(nanobind::handle object, const char* name) {
  PyObject* value = running_python([&] { return PyObject_GetAttrString(object.ptr(), name); });
  if (value == nullptr) {
    if (PyErr_ExceptionMatches(PyExc_AttributeError) == 0) {
      throw nanobind::python_error();
    }
    PyErr_Clear();
  }
  return HeldReference(value);  // a fresh value may have a finalizer: held_reference.hpp
}

/** @brief `value` as a T (what nb::cast accepts), or TypeError with `message`. */
template <typename T, typename Text>
T cast_or_type_error(nanobind::handle value, const Text& message) {
  T result{};
  if (!nanobind::try_cast<T>(value, result)) {
    throw nanobind::type_error(describe(message).c_str());
  }
  return result;
}

/** @brief TypeError "`what` must be an integer, not bool" for a bool (an int to Python). */
template <typename Text>
void refuse_bool(nanobind::handle value, const Text& what) {
  if (PyBool_Check(value.ptr())) {
    throw nanobind::type_error((describe(what) + " must be an integer, not bool").c_str());
  }
}

/**
 * @brief A flag argument: True or False only, else TypeError "`name` must be True or False, not
 *        <type>" (nanobind's caster named no argument).
 */
inline bool bool_argument(nanobind::handle value, const char* name) {
  if (value.ptr() == Py_True || value.ptr() == Py_False) {
    return value.ptr() == Py_True;
  }
  throw nanobind::type_error(
      (std::string(name) + " must be True or False, not " + type_text(value)).c_str());
}

/**
 * @brief An integer argument as T (an int, or anything whose __index__ gives one): TypeError
 *        "`what` must be an integer, not <type>" for anything else (an __index__ that refuses, as
 *        a float array's does, included); nullopt for an integer out of T's range, which the
 *        caller refuses in its own words.
 */
template <typename T, typename Text>
std::optional<T> integer_argument(nanobind::handle value, const Text& what) {
  const nanobind::object index = index_value(value);  // see index_value
  if (!index.is_valid() || !PyLong_Check(index.ptr())) {
    throw nanobind::type_error(
        (describe(what) + " must be an integer, not " + type_text(value)).c_str());
  }
  T result{};
  if (nanobind::try_cast<T>(index, result)) {
    return result;
  }
  return std::nullopt;
}

/**
 * @brief An integer argument `name` of `who` as T, read as integer_argument reads it but never a
 *        bool (TypeError "`name` must be an integer, not bool": True is no count or port); one
 *        out of T's range is InvalidArgumentError "`who`: `name` must be `range`, not <value>".
 *        nanobind's casters answered both with a TypeError that named no argument.
 */
template <typename T>
T named_integer(nanobind::handle value, const char* who, const char* name, const char* range) {
  refuse_bool(value, name);
  const std::optional<T> number = integer_argument<T>(value, name);
  if (!number) {
    raise_invalid_argument(std::string(who) + ": " + name + " must be " + range + ", not " +
                           display_text(value));
  }
  return *number;
}

/** @brief Whether `value` is a sequence other than text (str, bytes, bytearray). */
inline bool non_text_sequence(nanobind::handle value) {
  PyObject* object = value.ptr();
  return !PyUnicode_Check(object) && !PyBytes_Check(object) && !PyByteArray_Check(object) &&
         PySequence_Check(object) != 0;
}

/** @brief Whether a list of integers takes True and False for 1 and 0. */
enum class Bools {
  kIntegers,  ///< As Python's int does (the DLPack and array-interface readers, as 5.0's).
  kRefused,   ///< TypeError, as refuse_bool (this package's own arguments).
};

/**
 * @brief The items of `tuple`, a tuple, as 64-bit integers, each read as integer_argument reads
 *        it: TypeError "`what`[i] must be an integer, not <type>", InvalidArgumentError when one
 *        does not fit. Counted by the tuple's own size, never by len(), which a subclass may
 *        answer as it likes; a tuple holds its items while their __index__ runs.
 */
inline std::vector<std::int64_t> tuple_int64s(nanobind::handle tuple, const std::string& what,
                                              Bools bools = Bools::kIntegers) {
  const Py_ssize_t size = PyTuple_GET_SIZE(tuple.ptr());
  std::vector<std::int64_t> items;
  items.reserve(static_cast<std::size_t>(size));
  for (Py_ssize_t i = 0; i < size; ++i) {
    const nanobind::handle item = PyTuple_GET_ITEM(tuple.ptr(), i);
    const auto name = [&] { return what + "[" + std::to_string(i) + "]"; };
    if (bools == Bools::kRefused) {
      refuse_bool(item, name);
    }
    const std::optional<std::int64_t> number = integer_argument<std::int64_t>(item, name);
    if (!number) {
      raise_invalid_argument(name() + " " + display_text(item) + " does not fit 64 bits");
    }
    items.push_back(*number);
  }
  return items;
}

/**
 * @brief The items of `sequence` (any sequence but text) as 64-bit integers, as tuple_int64s
 *        reads them, from a tuple of its own: nanobind's std::vector caster reads a list's items
 *        in place, so an item's __index__ that empties the list had the next ones read from freed
 *        memory. TypeError "`what` must be a sequence of integers" for anything else.
 */
inline std::vector<std::int64_t> sequence_int64s(nanobind::handle sequence, const std::string& what,
                                                 Bools bools = Bools::kIntegers) {
  if (!non_text_sequence(sequence)) {
    throw nanobind::type_error(
        (what + " must be a sequence of integers, not " + type_text(sequence)).c_str());
  }
  // A sequence's __iter__, __len__ and __getitem__ are Python code: see running_python.
  // Its items may be fresh objects with finalizers: held_reference.hpp.
  const HeldReference items(running_python([&] { return PySequence_Tuple(sequence.ptr()); }));
  if (!items.is_valid()) {
    throw nanobind::python_error();
  }
  return tuple_int64s(items.handle(), what, bools);
}

/**
 * @brief The two items of `value` when it is a sequence of two: a tuple, a list or any other
 *        sequence but text, as nanobind's std::tuple caster reads the pairs of Holoscan 5.0's
 *        bindings (`max_version`, `dl_device`); nothing for anything else.
 */
inline std::optional<std::pair<HeldReference, HeldReference>> sequence_pair(
    nanobind::handle value) {
  if (!non_text_sequence(value)) {
    return std::nullopt;
  }
  PyObject* sequence = value.ptr();
  // A sequence's __len__ and __getitem__ are Python code, run by this thread: see running_python.
  const Py_ssize_t size = running_python([&] { return PySequence_Size(sequence); });
  if (size != 2) {
    if (size < 0) {
      // A sequence without a length is no pair; anything else its __len__ raised
      // (KeyboardInterrupt, its own error) is the caller's to see.
      if (PyErr_ExceptionMatches(PyExc_TypeError) == 0) {
        throw nanobind::python_error();
      }
      PyErr_Clear();
    }
    return std::nullopt;
  }
  // A __getitem__ may build its items anew, finalizers and all: held_reference.hpp.
  HeldReference first(running_python([&] { return PySequence_GetItem(sequence, 0); }));
  if (!first.is_valid()) {
    throw nanobind::python_error();
  }
  HeldReference second(running_python([&] { return PySequence_GetItem(sequence, 1); }));
  if (!second.is_valid()) {
    throw nanobind::python_error();
  }
  return std::make_pair(std::move(first), std::move(second));
}

}  // namespace holoscan::python
