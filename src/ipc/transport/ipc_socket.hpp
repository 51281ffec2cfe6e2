#pragma once
// The socket address of a filesystem path, shared by Channel::connect and Listener::listen.
#include <sys/un.h>

#include <string>

#include "holoscan/expected.hpp"

namespace holoscan::ipc::detail {

/** @brief `path` as an AF_UNIX address; kInvalidArgument when empty or too long for sun_path. */
expected<sockaddr_un, Error> unix_address(const std::string& path, const char* who);

}  // namespace holoscan::ipc::detail
