#pragma once
/**
 * @file
 * @brief Holoscan's error vocabulary: ErrorCode, Error (the value in `expected`) and RuntimeError
 *        (the exception), numbered and named as Holoscan numbers and names them.
 */
#include <cstdint>
#include <stdexcept>
#include <string>

namespace holoscan {

/**
 * @brief Category of a failure. Values 0-7 are Holoscan 4.x's; later codes are appended in the
 *        order Holoscan 5.0 documents them, then this library's own (kCudaError).
 */
enum class ErrorCode {
  kSuccess = 0,          ///< No error.
  kFailure = 1,          ///< Generic failure.
  kReceiveError = 2,     ///< A receive operation failed.
  kCodecError = 3,       ///< Serialization or deserialization failed.
  kInvalidArgument = 4,  ///< An argument or an imported DLPack field is invalid.
  kNotFound = 5,         ///< Something looked up does not exist.
  kDuplicateName = 6,    ///< A name is already taken.
  kNotImplemented = 7,   ///< Unsupported; also "this memory reference has no readiness contract".
  kNotReady = 8,         ///< The operation would block, or the state it needs does not exist yet.
  kBackpressured = 9,    ///< A consumer cannot take more now.
  kResourceExhausted = 10,  ///< A pool or the heap has nothing left to give.
  kClosed = 11,             ///< The channel or peer is closed.
  kStaleEndpoint = 12,      ///< The endpoint no longer refers to a live peer.
  kIncompatible = 13,       ///< The peer or data uses an incompatible version or layout.
  kTimeout = 14,            ///< A bounded wait ran out.
  kCudaError = 15,          ///< A CUDA call failed; Error::provenance holds its cudaError_t.
  kErrorCodeCount           ///< Number of error codes (not an error).
};

/** @brief The enumerator's name, e.g. "kInvalidArgument"; "kUnknown" for values out of range. */
const char* error_code_name(ErrorCode code) noexcept;

/**
 * @brief A recoverable failure, the error half of `expected<T, Error>`.
 *
 * An aggregate, as in Holoscan: `Error{ErrorCode::kInvalidArgument, "shape[0] is -1"}`. Building
 * one with an empty message allocates nothing.
 */
struct Error {
  ErrorCode code = ErrorCode::kFailure;  ///< Category of the failure.
  std::string message;                   ///< What failed and why; empty costs no allocation.
  std::uint64_t provenance = 0;          ///< The cudaError_t value for CUDA failures, else 0.
};

/** @brief "kCode: message", or just the code's name when the message is empty. */
std::string to_string(const Error& error);

/** @brief The exception form of an Error: a std::runtime_error that keeps its ErrorCode. */
class RuntimeError : public std::runtime_error {
 public:
  /** @brief A kFailure error with `what_arg` as its text. */
  using std::runtime_error::runtime_error;
  /** @brief An error whose text is the code's name. */
  explicit RuntimeError(ErrorCode error_code);
  /** @brief An error whose text is "<code name>: <what_arg>". */
  RuntimeError(ErrorCode error_code, const std::string& what_arg);
  /** @brief An error whose text is "<code name>: <what_arg>". */
  RuntimeError(ErrorCode error_code, const char* what_arg);
  /** @brief The exception for `error` (`throw RuntimeError(result.error())`). */
  explicit RuntimeError(const Error& error);

  /** @brief The error's category (kFailure when built without one). */
  ErrorCode code() const noexcept { return code_; }

  /** @brief "<code name>: <what_arg>", or the code's name alone for a null or empty what_arg. */
  static std::string construct_error_message(ErrorCode error_code, const char* what_arg);
  /** @brief The code's name (Holoscan 4.x spelling of error_code_name). */
  static const char* error_string(ErrorCode error_code) noexcept {
    return error_code_name(error_code);
  }

 private:
  ErrorCode code_ = ErrorCode::kFailure;
};

}  // namespace holoscan
