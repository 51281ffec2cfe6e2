#pragma once
// The library's Errors as Python exceptions: holoscan_dlpack.errors' class for each ErrorCode.
#include <nanobind/nanobind.h>

#include <string>
#include <string_view>

#include <holoscan/errors.hpp>

#include "held_reference.hpp"
#include "raised_exception.hpp"

namespace holoscan::python {

/** @brief Which Python exception an Error becomes. */
enum class Raise {
  kByCode,  ///< The HoloscanError subclass of the code (InvalidArgumentError, ...).
  kBuffer,  ///< BufferError: the DLPack protocol's exception for a failed import or export.
};

/**
 * @brief `text` as a str: UTF-8, with every byte that is none (a character cut in two, bytes a
 *        peer sent) written as \\xNN, where a strict decoding would raise UnicodeDecodeError.
 */
nanobind::str message_text(std::string_view text);

/** @brief Sets a `type` exception whose message is message_text(`text`); never throws. */
void set_error_text(PyObject* type, std::string_view text) noexcept;

/** @brief The exception object for `error` ("kCode: message"), not raised (a result's error). */
nanobind::object exception_for(const Error& error);

/** @brief Raises the exception for `error` ("kCode: message"), carrying its code and token. */
[[noreturn]] void raise_error(const Error& error, Raise kind = Raise::kByCode);

/** @brief Raises InvalidArgumentError with `message` (a bad argument value). */
[[noreturn]] void raise_invalid_argument(const std::string& message);

/** @brief Emits a DeprecationWarning naming the replacement; raises if warnings are errors. */
void warn_deprecated(const char* message);

/** @brief Saves the Python error indicator and restores it on scope exit (releases may run
 *         while an exception propagates; they must neither see nor clear it). */
class ErrorIndicatorGuard {
 public:
  ErrorIndicatorGuard() noexcept;
  ~ErrorIndicatorGuard();
  ErrorIndicatorGuard(const ErrorIndicatorGuard&) = delete;
  ErrorIndicatorGuard& operator=(const ErrorIndicatorGuard&) = delete;

 private:
  HeldReference saved_;
};

}  // namespace holoscan::python
