#include "holoscan/expected.hpp"

namespace holoscan {

const char* error_code_name(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::kSuccess:
      return "kSuccess";
    case ErrorCode::kFailure:
      return "kFailure";
    case ErrorCode::kInvalidArgument:
      return "kInvalidArgument";
    case ErrorCode::kNotImplemented:
      return "kNotImplemented";
    case ErrorCode::kNotReady:
      return "kNotReady";
    case ErrorCode::kResourceExhausted:
      return "kResourceExhausted";
    case ErrorCode::kCudaError:
      return "kCudaError";
  }
  return "kUnknown";
}

}  // namespace holoscan
