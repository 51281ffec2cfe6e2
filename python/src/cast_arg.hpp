#pragma once
// Python values read as C++ ones with an error that names the argument: a failed nb::cast
// escapes a bound function as RuntimeError "std::bad_cast", which says neither what was wrong nor
// where.
#include <Python.h>

#include <nanobind/nanobind.h>

#include <optional>
#include <string>

namespace holoscan::python {

/** @brief `value` as a T (what nb::cast accepts), or TypeError with `message`. */
template <typename T>
T cast_or_type_error(nanobind::handle value, const char* message) {
  T result{};
  if (!nanobind::try_cast<T>(value, result)) {
    throw nanobind::type_error(message);
  }
  return result;
}

/**
 * @brief An integer argument as T (an int, or anything with __index__): TypeError "`what` must be
 *        an integer, not <type>" for any other type; nullopt for an integer out of T's range,
 *        which the caller refuses in its own words.
 */
template <typename T>
std::optional<T> integer_argument(nanobind::handle value, const std::string& what) {
  T result{};
  if (nanobind::try_cast<T>(value, result)) {
    return result;
  }
  if (PyIndex_Check(value.ptr()) == 0) {
    throw nanobind::type_error((what + " must be an integer, not " +
                                std::string(nanobind::type_name(value.type()).c_str()))
                                   .c_str());
  }
  return std::nullopt;
}

}  // namespace holoscan::python
