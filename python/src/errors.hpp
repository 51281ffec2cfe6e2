#pragma once
// The library's Errors as Python exceptions, with its message.
#include <holoscan/errors.hpp>

namespace holoscan::python {

/** @brief Which Python exception an Error becomes. */
enum class Raise {
  kByCode,  ///< ValueError for kInvalidArgument, RuntimeError otherwise.
  kBuffer,  ///< BufferError: the DLPack protocol's exception for a failed import or export.
};

/** @brief Throws the nanobind exception for `error` ("kCode: message"). */
[[noreturn]] void raise_error(const Error& error, Raise kind = Raise::kByCode);

/** @brief Saves the Python error indicator and restores it on scope exit (releases may run
 *         while an exception propagates; they must neither see nor clear it). */
class ErrorIndicatorGuard {
 public:
  ErrorIndicatorGuard() noexcept;
  ~ErrorIndicatorGuard();
  ErrorIndicatorGuard(const ErrorIndicatorGuard&) = delete;
  ErrorIndicatorGuard& operator=(const ErrorIndicatorGuard&) = delete;

 private:
  void* saved_[3] = {nullptr, nullptr, nullptr};
};

}  // namespace holoscan::python
