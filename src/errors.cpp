#include "holoscan/errors.hpp"

namespace holoscan {

const char* error_code_name(ErrorCode code) noexcept {
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
    case ErrorCode::kNotReady:
      return "kNotReady";
    case ErrorCode::kBackpressured:
      return "kBackpressured";
    case ErrorCode::kResourceExhausted:
      return "kResourceExhausted";
    case ErrorCode::kClosed:
      return "kClosed";
    case ErrorCode::kStaleEndpoint:
      return "kStaleEndpoint";
    case ErrorCode::kIncompatible:
      return "kIncompatible";
    case ErrorCode::kTimeout:
      return "kTimeout";
    case ErrorCode::kCudaError:
      return "kCudaError";
    case ErrorCode::kErrorCodeCount:
      break;
  }
  return "kUnknown";
}

std::string to_string(const Error& error) {
  return RuntimeError::construct_error_message(error.code, error.message.c_str());
}

std::string RuntimeError::construct_error_message(ErrorCode error_code, const char* what_arg) {
  std::string text = error_code_name(error_code);
  if (what_arg != nullptr && *what_arg != '\0') {
    text.append(": ").append(what_arg);
  }
  return text;
}

RuntimeError::RuntimeError(ErrorCode error_code)
    : std::runtime_error(construct_error_message(error_code, nullptr)), code_(error_code) {}

RuntimeError::RuntimeError(ErrorCode error_code, const std::string& what_arg)
    : std::runtime_error(construct_error_message(error_code, what_arg.c_str())),
      code_(error_code) {}

RuntimeError::RuntimeError(ErrorCode error_code, const char* what_arg)
    : std::runtime_error(construct_error_message(error_code, what_arg)), code_(error_code) {}

RuntimeError::RuntimeError(const Error& error)
    : std::runtime_error(to_string(error)), code_(error.code) {}

}  // namespace holoscan
