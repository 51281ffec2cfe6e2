#include "ipc/transport/ipc_identity.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "ipc/ipc_error.hpp"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434  // the same number on every Linux architecture
#endif

namespace holoscan::ipc::detail {
namespace {

constexpr const char* kWho = "ipc channel";

// What /proc/self/fdinfo says of a descriptor: the "Pid:" line of a pidfd (-1 once its process
// has been reaped), or no such line for anything else.
struct PidfdInfo {
  bool is_pidfd = false;
  long pid = -1;
};

expected<PidfdInfo, Error> read_fdinfo(int fd) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
  UniqueFd info(::open(path, O_RDONLY | O_CLOEXEC));
  if (!info.valid()) {
    return make_unexpected(system_error(kWho, "open(/proc/self/fdinfo)", errno));
  }
  char text[1024] = {};
  std::size_t used = 0;
  while (used + 1 < sizeof(text)) {
    const ssize_t n = ::read(info.get(), text + used, sizeof(text) - 1 - used);
    if (n > 0) {
      used += static_cast<std::size_t>(n);
    } else if (n == 0) {
      break;
    } else if (errno != EINTR) {
      return make_unexpected(system_error(kWho, "read(/proc/self/fdinfo)", errno));
    }
  }
  PidfdInfo result;
  for (const char* line = text; line != nullptr && *line != '\0';) {
    if (std::strncmp(line, "Pid:", 4) == 0) {
      result.is_pidfd = true;
      result.pid = std::strtol(line + 4, nullptr, 10);
      break;
    }
    line = std::strchr(line, '\n');
    line = line != nullptr ? line + 1 : nullptr;
  }
  return result;
}

Error denied(const std::string& why) {
  return Error{ErrorCode::kPermissionDenied, std::string(kWho) + ": " + why, 0};
}

}  // namespace

expected<UniqueFd, Error> own_pidfd() {
  UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, ::getpid(), 0)));
  if (!pidfd.valid()) {
    return make_unexpected(system_error(kWho, "pidfd_open", errno));
  }
  return pidfd;
}

expected<void, Error> receive_credentials(int socket) {
  const int on = 1;
  if (::setsockopt(socket, SOL_SOCKET, SO_PASSCRED, &on, sizeof(on)) != 0) {
    return make_unexpected(system_error(kWho, "setsockopt(SO_PASSCRED)", errno));
  }
  return {};
}

std::int32_t pidfd_pid(int pidfd) noexcept {
  if (pidfd < 0) {
    return 0;
  }
  try {
    const expected<PidfdInfo, Error> info = read_fdinfo(pidfd);
    return info && info->is_pidfd ? static_cast<std::int32_t>(info->pid) : 0;
  } catch (...) {
    return 0;  // out of memory for the error's text: unknown
  }
}

expected<void, Error> check_sender(const UniqueFd& pidfd, std::int32_t sender_pid) {
  if (sender_pid <= 0) {
    return make_unexpected(denied(
        "the Hello came without its sender's credentials (SCM_CREDENTIALS), or from a process "
        "outside this pid namespace"));
  }
  auto info = read_fdinfo(pidfd.get());
  if (!info) {
    // Unproven is refused, whatever stopped the check (out of descriptors, say): the frame is
    // consumed and the connection stays usable, as for any other refused Hello. As a plain
    // failure it read as a socket that can no longer be read, and an exporter closed a live peer.
    return make_unexpected(denied("its pidfd could not be checked: " + info.error().message));
  }
  if (!info->is_pidfd) {
    return make_unexpected(denied("the Hello's descriptor is not a pidfd"));
  }
  if (info->pid != sender_pid) {
    return make_unexpected(denied(
        "the Hello's pidfd names " +
        (info->pid > 0 ? "process " + std::to_string(info->pid) : std::string("no live process")) +
        ", not its sender (pid " + std::to_string(sender_pid) + ", as the kernel says)"));
  }
  return {};
}

}  // namespace holoscan::ipc::detail
