#include "ipc/transport/ipc_socket.hpp"

#include <sys/socket.h>

#include <cstring>

#include "ipc/ipc_error.hpp"

namespace holoscan::ipc::detail {
namespace {

// The path as a message shows it: a NUL written as \0, so that the text reads as the caller
// wrote the path rather than ending at the NUL wherever it is read as a C string.
std::string shown_path(const std::string& path) {
  std::string shown;
  shown.reserve(path.size());
  for (const char c : path) {
    if (c == '\0') {
      shown += "\\0";
    } else {
      shown += c;
    }
  }
  return shown;
}

}  // namespace

expected<sockaddr_un, Error> unix_address(const std::string& path, const char* who) {
  sockaddr_un address{};
  // sun_path needs room for the terminating NUL; an embedded NUL would name another path.
  if (path.empty() || path.size() >= sizeof(address.sun_path) ||
      path.find('\0') != std::string::npos) {
    return make_unexpected(invalid_argument(
        who, "socket path \"" + shown_path(path) + "\" must be 1 to " +
                 std::to_string(sizeof(address.sun_path) - 1) + " bytes without NUL"));
  }
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, path.data(), path.size());
  return address;
}

}  // namespace holoscan::ipc::detail
