#include "ucx_error.hpp"

namespace holoscan::ucx::detail {
namespace {

ErrorCode code_of(ucs_status_t status) noexcept {
  if (is_connection_failure(status)) {
    return ErrorCode::kClosed;
  }
  switch (status) {
    case UCS_ERR_TIMED_OUT:
      return ErrorCode::kTimeout;
    case UCS_ERR_NO_MEMORY:
    case UCS_ERR_NO_RESOURCE:
    case UCS_ERR_EXCEEDS_LIMIT:
      return ErrorCode::kResourceExhausted;
    case UCS_ERR_UNSUPPORTED:
    case UCS_ERR_NOT_IMPLEMENTED:
      return ErrorCode::kNotImplemented;
    case UCS_ERR_INVALID_PARAM:
    case UCS_ERR_INVALID_ADDR:
      return ErrorCode::kInvalidArgument;
    case UCS_ERR_BUSY:
    case UCS_ERR_ALREADY_EXISTS:
      return ErrorCode::kDuplicateName;
    default:
      return ErrorCode::kFailure;
  }
}

}  // namespace

bool is_connection_failure(ucs_status_t status) noexcept {
  if (status <= UCS_ERR_FIRST_LINK_FAILURE && status >= UCS_ERR_LAST_ENDPOINT_FAILURE) {
    return true;  // link and endpoint failures, the endpoint timeout among them
  }
  switch (status) {
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_NOT_CONNECTED:
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_REJECTED:
    case UCS_ERR_CANCELED:
    case UCS_ERR_IO_ERROR:
      return true;
    default:
      return false;
  }
}

Error ucx_error(const std::string& who, const char* call, ucs_status_t status) {
  return Error{code_of(status),
               who + ": " + call + " failed: " + ucs_status_string(status) + " (" +
                   std::to_string(static_cast<int>(status)) + ")",
               0};
}

}  // namespace holoscan::ucx::detail
