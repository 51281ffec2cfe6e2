#pragma once
/**
 * @file
 * @brief Holoscan's error vocabulary: ErrorCode, Error (the value in `expected`) and RuntimeError
 *        (the exception), numbered and named as Holoscan numbers and names them.
 */
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include "holoscan/export.hpp"

namespace holoscan {

/**
 * @brief Category of a failure: exactly Holoscan 5.0's table, values and names. There is no
 *        CUDA-specific code: a failed CUDA call is kFailure with its cudaError_t (or CUresult)
 *        in Error::provenance and the call and CUDA's error name in the message.
 */
enum class ErrorCode {
  kSuccess = 0,  ///< No error.
  kFailure = 1,  ///< Generic failure; also every failed CUDA call (Error::provenance holds its error code).
  kReceiveError = 2,  ///< A receive operation failed.
  kCodecError = 3,  ///< Serialization or deserialization failed.
  kInvalidArgument = 4,  ///< An argument or an imported DLPack field is invalid.
  kNotFound = 5,  ///< Something looked up does not exist.
  kDuplicateName = 6,  ///< A name is already taken.
  kNotImplemented = 7,  ///< Unsupported; also "this memory reference has no readiness contract".
  kBackpressured = 8,  ///< A consumer cannot take more now.
  kNotReady = 9,  ///< The operation would block, or the state it needs does not exist yet.
  kStaleEndpoint = 10,  ///< The endpoint no longer refers to a live peer.
  kClosed = 11,  ///< The channel or peer is closed.
  kResourceExhausted = 12,  ///< A pool or the heap has nothing left to give.
  kTimeout = 13,  ///< A bounded wait ran out.
  kPermissionDenied = 14,  ///< The caller lacks the authority asked for (for example writing a read-only tensor).
  kInterrupted = 15,  ///< A wait was interrupted before it finished.
  kProtocolError = 16,  ///< A peer broke the wire protocol.
  kIncompatible = 17,  ///< The peer or data uses an incompatible version or layout.
  kInputEmpty = 18,  ///< Holoscan 5.0's code of this name (its operator framework uses it).
  kInputNotSelected = 19,  ///< Holoscan 5.0's code of this name (its operator framework uses it).
  kInputUndeclared = 20,  ///< Holoscan 5.0's code of this name (its operator framework uses it).
  kInputSelectionCardinalityMismatch = 21,  ///< Holoscan 5.0's code of this name (its operator framework uses it).
  kPublicationIndeterminate = 22,  ///< Holoscan 5.0's code of this name (its operator framework uses it).
  kNotSupported = 23,  ///< The request is understood but refused (for example a legacy export of a read-only tensor).
  kLifecycleInvalidRestartStage = 24,  ///< Holoscan 5.0's code of this name (its operator framework uses it).
  kLifecycleTransactionsDisabled = 25,  ///< Holoscan 5.0's code of this name (its operator framework uses it).
  kStaleOperatorRef = 26,  ///< Holoscan 5.0's code of this name (its operator framework uses it).
  kCrossSessionOperatorRef = 27,  ///< Holoscan 5.0's code of this name (its operator framework uses it).
  kLifecycleRestartUnauthorized = 28,  ///< Holoscan 5.0's code of this name (its operator framework uses it).
  kLifecycleRestartQueueFull = 29,  ///< Holoscan 5.0's code of this name (its operator framework uses it).
  kLifecycleRestartUnsupportedInProfile = 30,  ///< Holoscan 5.0's code of this name (its operator framework uses it).
  kLifecycleInvalidCallingContext = 31,  ///< Holoscan 5.0's code of this name (its operator framework uses it).
  kLifecycleRunState = 32,  ///< Holoscan 5.0's code of this name (its operator framework uses it).
  kLifecycleQuiesceFailed = 33,  ///< Holoscan 5.0's code of this name (its operator framework uses it).
  kLifecycleStageFailed = 34,  ///< Holoscan 5.0's code of this name (its operator framework uses it).
  kLifecycleRollbackFailed = 35,  ///< Holoscan 5.0's code of this name (its operator framework uses it).
  kPublicationPartial = 36,  ///< Holoscan 5.0's code of this name (its operator framework uses it).
  kRateBindingInvalid = 37,  ///< Holoscan 5.0's code of this name (its operator framework uses it).
  kRateBindingAboveMaximum = 38,  ///< Holoscan 5.0's code of this name (its operator framework uses it).
  kRateBindingConflict = 39,  ///< Holoscan 5.0's code of this name (its operator framework uses it).
  kArithmeticOverflow = 40,  ///< A size or offset computation overflowed.
  kPreparedStorageInvalid = 41,  ///< Holoscan 5.0's code of this name (its operator framework uses it).
};

/** @brief The enumerator's name, e.g. "kInvalidArgument"; "unknown" for a value outside the table. */
HOLOSCAN_DLPACK_API std::string_view error_code_name(ErrorCode code) noexcept;

/**
 * @brief A recoverable failure, the error half of `expected<T, Error>`.
 *
 * An aggregate, as in Holoscan: `Error{ErrorCode::kInvalidArgument, "shape[0] is -1"}`. Building
 * one with an empty message allocates nothing.
 */
struct HOLOSCAN_DLPACK_API Error {
  ErrorCode code = ErrorCode::kFailure;  ///< Category of the failure.
  std::string message;                   ///< What failed and why; empty costs no allocation.
  std::uint64_t provenance = 0;          ///< The cudaError_t value for CUDA failures, else 0.
};

/** @brief "kCode: message", or just the code's name when the message is empty. */
HOLOSCAN_DLPACK_API std::string to_string(const Error& error);

/** @brief The exception form of an Error: a std::runtime_error that keeps its ErrorCode. */
class HOLOSCAN_DLPACK_API RuntimeError : public std::runtime_error {
 public:
  /** @brief A kFailure error with `what_arg` as its text. */
  using std::runtime_error::runtime_error;
  /** @brief An error whose text is the code's name. */
  explicit RuntimeError(ErrorCode error_code);
  /** @brief An error whose text is "<code name>: <what_arg>". */
  RuntimeError(ErrorCode error_code, const std::string& what_arg);
  /** @brief An error whose text is "<code name>: <what_arg>" (the name alone for a null one). */
  RuntimeError(ErrorCode error_code, const char* what_arg);
  /** @brief An error whose text is "<code name>: <what_arg>". */
  RuntimeError(ErrorCode error_code, std::string_view what_arg);
  /** @brief The exception for `error` (`throw RuntimeError(result.error())`); its text is
   *         to_string(error), the code's name alone for an empty message. */
  explicit RuntimeError(const Error& error);

  /** @brief The error's category (kFailure when built without one). */
  ErrorCode code() const noexcept { return code_; }

  /** @brief "<code name>: <what_arg>", or the code's name alone for a null what_arg. */
  static std::string construct_error_message(ErrorCode error_code, const char* what_arg);
  /** @brief "<code name>: <what_arg>", an empty what_arg too ("kFailure: "), as Holoscan 5.0. */
  static std::string construct_error_message(ErrorCode error_code, std::string_view what_arg);
  /** @brief The code's name (Holoscan 4.x spelling of error_code_name); never null. */
  static const char* error_string(ErrorCode error_code) noexcept {
    return error_code_name(error_code).data();  // every name is a NUL-terminated literal
  }

 private:
  ErrorCode code_ = ErrorCode::kFailure;
};

/**
 * @brief The Error a RuntimeError was thrown for, as Holoscan 5.0's inline make_error builds it:
 *        its code, its text without the leading "<code name>: " (empty when the text is the
 *        name alone), provenance 0.
 */
inline Error make_error(const RuntimeError& error) {
  const std::string_view name = error_code_name(error.code());
  std::string_view text = error.what();
  if (text.substr(0, name.size()) == name) {
    const std::string_view rest = text.substr(name.size());
    if (rest.empty()) {
      text = rest;
    } else if (rest.substr(0, 2) == ": ") {
      text = rest.substr(2);
    }
  }
  return Error{error.code(), std::string(text), 0};
}

}  // namespace holoscan
