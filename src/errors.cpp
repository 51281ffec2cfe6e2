#include "holoscan/errors.hpp"

namespace holoscan {

std::string_view error_code_name(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::kSuccess:
      return "kSuccess";
    case ErrorCode::kFailure:
      return "kFailure";
    case ErrorCode::kReceiveError:
      return "kReceiveError";
    case ErrorCode::kCodecError:
      return "kCodecError";
    case ErrorCode::kInvalidArgument:
      return "kInvalidArgument";
    case ErrorCode::kNotFound:
      return "kNotFound";
    case ErrorCode::kDuplicateName:
      return "kDuplicateName";
    case ErrorCode::kNotImplemented:
      return "kNotImplemented";
    case ErrorCode::kBackpressured:
      return "kBackpressured";
    case ErrorCode::kNotReady:
      return "kNotReady";
    case ErrorCode::kStaleEndpoint:
      return "kStaleEndpoint";
    case ErrorCode::kClosed:
      return "kClosed";
    case ErrorCode::kResourceExhausted:
      return "kResourceExhausted";
    case ErrorCode::kTimeout:
      return "kTimeout";
    case ErrorCode::kPermissionDenied:
      return "kPermissionDenied";
    case ErrorCode::kInterrupted:
      return "kInterrupted";
    case ErrorCode::kProtocolError:
      return "kProtocolError";
    case ErrorCode::kIncompatible:
      return "kIncompatible";
    case ErrorCode::kInputEmpty:
      return "kInputEmpty";
    case ErrorCode::kInputNotSelected:
      return "kInputNotSelected";
    case ErrorCode::kInputUndeclared:
      return "kInputUndeclared";
    case ErrorCode::kInputSelectionCardinalityMismatch:
      return "kInputSelectionCardinalityMismatch";
    case ErrorCode::kPublicationIndeterminate:
      return "kPublicationIndeterminate";
    case ErrorCode::kNotSupported:
      return "kNotSupported";
    case ErrorCode::kLifecycleInvalidRestartStage:
      return "kLifecycleInvalidRestartStage";
    case ErrorCode::kLifecycleTransactionsDisabled:
      return "kLifecycleTransactionsDisabled";
    case ErrorCode::kStaleOperatorRef:
      return "kStaleOperatorRef";
    case ErrorCode::kCrossSessionOperatorRef:
      return "kCrossSessionOperatorRef";
    case ErrorCode::kLifecycleRestartUnauthorized:
      return "kLifecycleRestartUnauthorized";
    case ErrorCode::kLifecycleRestartQueueFull:
      return "kLifecycleRestartQueueFull";
    case ErrorCode::kLifecycleRestartUnsupportedInProfile:
      return "kLifecycleRestartUnsupportedInProfile";
    case ErrorCode::kLifecycleInvalidCallingContext:
      return "kLifecycleInvalidCallingContext";
    case ErrorCode::kLifecycleRunState:
      return "kLifecycleRunState";
    case ErrorCode::kLifecycleQuiesceFailed:
      return "kLifecycleQuiesceFailed";
    case ErrorCode::kLifecycleStageFailed:
      return "kLifecycleStageFailed";
    case ErrorCode::kLifecycleRollbackFailed:
      return "kLifecycleRollbackFailed";
    case ErrorCode::kPublicationPartial:
      return "kPublicationPartial";
    case ErrorCode::kRateBindingInvalid:
      return "kRateBindingInvalid";
    case ErrorCode::kRateBindingAboveMaximum:
      return "kRateBindingAboveMaximum";
    case ErrorCode::kRateBindingConflict:
      return "kRateBindingConflict";
    case ErrorCode::kArithmeticOverflow:
      return "kArithmeticOverflow";
    case ErrorCode::kPreparedStorageInvalid:
      return "kPreparedStorageInvalid";
  }
  return "unknown";  // Holoscan 5.0's answer for a value outside its table
}

std::string to_string(const Error& error) {
  // The whole message: one that names an argument holding a NUL goes on after it. An empty one
  // reads as the code's name alone, as Holoscan 5.0's RuntimeError(const Error&) renders it.
  if (error.message.empty()) {
    return std::string(error_code_name(error.code));
  }
  return RuntimeError::construct_error_message(error.code, std::string_view(error.message));
}

std::string RuntimeError::construct_error_message(ErrorCode error_code, const char* what_arg) {
  if (what_arg == nullptr) {
    return std::string(error_code_name(error_code));
  }
  return construct_error_message(error_code, std::string_view(what_arg));
}

// Holoscan 5.0 formats "{}: {}" whatever the text: an empty one leaves "kFailure: ".
std::string RuntimeError::construct_error_message(ErrorCode error_code, std::string_view what_arg) {
  std::string text(error_code_name(error_code));
  text.append(": ").append(what_arg);
  return text;
}

RuntimeError::RuntimeError(ErrorCode error_code)
    : std::runtime_error(construct_error_message(error_code, nullptr)), code_(error_code) {}

RuntimeError::RuntimeError(ErrorCode error_code, const std::string& what_arg)
    : std::runtime_error(construct_error_message(error_code, std::string_view(what_arg))),
      code_(error_code) {}

RuntimeError::RuntimeError(ErrorCode error_code, const char* what_arg)
    : std::runtime_error(construct_error_message(error_code, what_arg)), code_(error_code) {}

RuntimeError::RuntimeError(ErrorCode error_code, std::string_view what_arg)
    : std::runtime_error(construct_error_message(error_code, what_arg)), code_(error_code) {}

RuntimeError::RuntimeError(const Error& error)
    : std::runtime_error(to_string(error)), code_(error.code) {}

}  // namespace holoscan
