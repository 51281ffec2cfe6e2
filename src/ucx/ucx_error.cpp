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

const char* status_name(ucs_status_t status) noexcept {
  // Spelled out rather than derived: UCX's header gives no name table, and a message that names
  // the status as its header does can be searched for.
  switch (status) {
    case UCS_OK:
      return "UCS_OK";
    case UCS_INPROGRESS:
      return "UCS_INPROGRESS";
    case UCS_ERR_NO_MESSAGE:
      return "UCS_ERR_NO_MESSAGE";
    case UCS_ERR_NO_RESOURCE:
      return "UCS_ERR_NO_RESOURCE";
    case UCS_ERR_IO_ERROR:
      return "UCS_ERR_IO_ERROR";
    case UCS_ERR_NO_MEMORY:
      return "UCS_ERR_NO_MEMORY";
    case UCS_ERR_INVALID_PARAM:
      return "UCS_ERR_INVALID_PARAM";
    case UCS_ERR_UNREACHABLE:
      return "UCS_ERR_UNREACHABLE";
    case UCS_ERR_INVALID_ADDR:
      return "UCS_ERR_INVALID_ADDR";
    case UCS_ERR_NOT_IMPLEMENTED:
      return "UCS_ERR_NOT_IMPLEMENTED";
    case UCS_ERR_MESSAGE_TRUNCATED:
      return "UCS_ERR_MESSAGE_TRUNCATED";
    case UCS_ERR_NO_PROGRESS:
      return "UCS_ERR_NO_PROGRESS";
    case UCS_ERR_BUFFER_TOO_SMALL:
      return "UCS_ERR_BUFFER_TOO_SMALL";
    case UCS_ERR_NO_ELEM:
      return "UCS_ERR_NO_ELEM";
    case UCS_ERR_SOME_CONNECTS_FAILED:
      return "UCS_ERR_SOME_CONNECTS_FAILED";
    case UCS_ERR_NO_DEVICE:
      return "UCS_ERR_NO_DEVICE";
    case UCS_ERR_BUSY:
      return "UCS_ERR_BUSY";
    case UCS_ERR_CANCELED:
      return "UCS_ERR_CANCELED";
    case UCS_ERR_SHMEM_SEGMENT:
      return "UCS_ERR_SHMEM_SEGMENT";
    case UCS_ERR_ALREADY_EXISTS:
      return "UCS_ERR_ALREADY_EXISTS";
    case UCS_ERR_OUT_OF_RANGE:
      return "UCS_ERR_OUT_OF_RANGE";
    case UCS_ERR_TIMED_OUT:
      return "UCS_ERR_TIMED_OUT";
    case UCS_ERR_EXCEEDS_LIMIT:
      return "UCS_ERR_EXCEEDS_LIMIT";
    case UCS_ERR_UNSUPPORTED:
      return "UCS_ERR_UNSUPPORTED";
    case UCS_ERR_REJECTED:
      return "UCS_ERR_REJECTED";
    case UCS_ERR_NOT_CONNECTED:
      return "UCS_ERR_NOT_CONNECTED";
    case UCS_ERR_CONNECTION_RESET:
      return "UCS_ERR_CONNECTION_RESET";
    case UCS_ERR_ENDPOINT_TIMEOUT:
      return "UCS_ERR_ENDPOINT_TIMEOUT";
    default:
      return nullptr;
  }
}

std::string describe_status(ucs_status_t status) {
  const char* name = status_name(status);
  std::string text = ucs_status_string(status);
  if (name != nullptr) {
    text += std::string(", ") + name;
  }
  return text + " (" + std::to_string(static_cast<int>(status)) + ")";
}

Error ucx_error(const std::string& who, const char* call, ucs_status_t status) {
  return Error{code_of(status), who + ": " + call + " failed: " + describe_status(status), 0};
}

}  // namespace holoscan::ucx::detail
