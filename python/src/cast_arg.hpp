#pragma once
// Python values read as C++ ones with an error that names the argument: a failed nb::cast
// escapes a bound function as RuntimeError "std::bad_cast", which says neither what was wrong nor
// where. Names and messages may be given as text or as a callable that makes the text: imports
// and stream arguments are hot, and a name is only needed on failure.
#include <Python.h>

#include <nanobind/nanobind.h>

#include <optional>
#include <string>
#include <type_traits>
#include <utility>

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

/** @brief `value` as a T (what nb::cast accepts), or TypeError with `message`. */
template <typename T, typename Text>
T cast_or_type_error(nanobind::handle value, const Text& message) {
  T result{};
  if (!nanobind::try_cast<T>(value, result)) {
    throw nanobind::type_error(describe(message).c_str());
  }
  return result;
}

/**
 * @brief An integer argument as T (an int, or anything with __index__): TypeError "`what` must be
 *        an integer, not <type>" for any other type; nullopt for an integer out of T's range,
 *        which the caller refuses in its own words.
 */
template <typename T, typename Text>
std::optional<T> integer_argument(nanobind::handle value, const Text& what) {
  T result{};
  if (nanobind::try_cast<T>(value, result)) {
    return result;
  }
  if (PyIndex_Check(value.ptr()) == 0) {
    throw nanobind::type_error((describe(what) + " must be an integer, not " +
                                std::string(nanobind::type_name(value.type()).c_str()))
                                   .c_str());
  }
  return std::nullopt;
}

/**
 * @brief The two items of `value` when it is a sequence of two: a tuple, a list or any other
 *        sequence but text, as nanobind's std::tuple caster reads the pairs of Holoscan 5.0's
 *        bindings (`max_version`, `dl_device`); nothing for anything else.
 */
inline std::optional<std::pair<nanobind::object, nanobind::object>> sequence_pair(
    nanobind::handle value) {
  PyObject* sequence = value.ptr();
  if (PyUnicode_Check(sequence) || PyBytes_Check(sequence) || PyByteArray_Check(sequence) ||
      PySequence_Check(sequence) == 0) {
    return std::nullopt;
  }
  const Py_ssize_t size = PySequence_Size(sequence);
  if (size != 2) {
    if (size < 0) {
      PyErr_Clear();  // a length that cannot be read is no pair
    }
    return std::nullopt;
  }
  nanobind::object first = nanobind::steal(PySequence_GetItem(sequence, 0));
  if (!first.is_valid()) {
    throw nanobind::python_error();
  }
  nanobind::object second = nanobind::steal(PySequence_GetItem(sequence, 1));
  if (!second.is_valid()) {
    throw nanobind::python_error();
  }
  return std::make_pair(std::move(first), std::move(second));
}

}  // namespace holoscan::python
