#include "ipc/ipc_error.hpp"

#include <cinttypes>
#include <cstdio>
#include <system_error>

namespace holoscan::ipc::detail {

Error invalid_argument(const char* who, const std::string& what) {
  return Error{ErrorCode::kInvalidArgument, std::string(who) + ": " + what, 0};
}

Error system_error(const char* who, const char* call, int err) {
  // generic_category() words errno values without strerror()'s shared buffer.
  return Error{ErrorCode::kFailure,
               std::string(who) + ": " + call + " failed: " + std::generic_category().message(err) +
                   " (errno " + std::to_string(err) + ")",
               0};
}

Error out_of_memory(const char* who) noexcept {
  try {
    return Error{ErrorCode::kResourceExhausted, std::string(who) + ": out of memory", 0};
  } catch (...) {
    return Error{ErrorCode::kResourceExhausted, {}, 0};
  }
}

std::string hex(std::uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof(text), "0x%" PRIx64, value);
  return text;
}

}  // namespace holoscan::ipc::detail
