// Why a readable pidfd means an importer's GPU use of exported memory is over: the kernel makes a
// pidfd readable in exit_notify(), the last step of do_exit(). Before that, do_exit() has dropped
// the process's address space (exit_mm) and closed its files (exit_files, with the final fput()s
// run by exit_task_work), and closing the last reference to the GPU driver's device files is what
// tears the process's contexts down: its queued work is stopped and its mappings of the exported
// memory are gone. So once the pidfd is readable nothing of that process can touch the memory. A
// waitpid()-style notification would be no earlier, and polling /proc for the pid could be fooled
// by a reused pid; the pidfd names one process for good.
//
// The one gap: a child the importer forked that still holds the driver's descriptors keeps them
// open past the importer's exit, and the context may then outlive the readable pidfd. Importers
// should not fork while they hold imports (CUDA does not support a context in a forked child).
#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <new>
#include <string>

#include "holoscan/ipc/fd.hpp"
#include "holoscan/ipc/liveness.hpp"
#include "ipc/ipc_error.hpp"
#include "ipc/transport/ipc_identity.hpp"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434  // the same number on every Linux architecture
#endif
#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77  // Linux 6.5; C libraries older than the kernel lack the name
#endif

namespace holoscan::ipc {
namespace {

constexpr const char* kWho = "ipc liveness";

class PidfdLiveness final : public PeerLiveness {
 public:
  explicit PidfdLiveness(UniqueFd pidfd) noexcept : pidfd_(std::move(pidfd)) {}

  bool exited() noexcept override {
    if (!exited_) {
      pollfd entry{pidfd_.get(), POLLIN, 0};
      // A failed poll() counts as "still running": holding a claim too long is safe, dropping it
      // early is not.
      exited_ = ::poll(&entry, 1, 0) == 1 && (entry.revents & POLLIN) != 0;
    }
    return exited_;
  }

 private:
  UniqueFd pidfd_;
  bool exited_ = false;
};

// Watches `pidfd`; kResourceExhausted (the descriptor closed) out of memory.
expected<std::unique_ptr<PeerLiveness>, Error> make_liveness(UniqueFd pidfd) noexcept {
  std::unique_ptr<PeerLiveness> watch(new (std::nothrow) PidfdLiveness(std::move(pidfd)));
  if (watch == nullptr) {
    return make_unexpected(detail::out_of_memory(kWho));
  }
  return watch;
}

}  // namespace

expected<std::unique_ptr<PeerLiveness>, Error> watch_process(std::int32_t pid) {
  if (pid <= 0) {
    return make_unexpected(
        detail::invalid_argument(kWho, "pid " + std::to_string(pid) + " is not a process id"));
  }
  UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  if (!pidfd.valid()) {
    const int err = errno;
    return make_unexpected(detail::system_error(kWho, "pidfd_open", err));
  }
  return make_liveness(std::move(pidfd));
}

expected<std::unique_ptr<PeerLiveness>, Error> watch_pidfd(UniqueFd pidfd) {
  if (!pidfd.valid()) {
    return make_unexpected(detail::invalid_argument(kWho, "no pidfd to watch"));
  }
  // Another descriptor (a socket, stdin) turns readable for its own reasons: read as the peer's
  // exit, its claims would drop while it still reads the memory.
  if (detail::pidfd_pid(pidfd.get()) == 0) {
    return make_unexpected(detail::invalid_argument(
        kWho, "descriptor " + std::to_string(pidfd.get()) + " is not a pidfd"));
  }
  return make_liveness(std::move(pidfd));
}

expected<std::unique_ptr<PeerLiveness>, Error> watch_peer(const Channel& channel) {
  if (channel.fd() < 0) {
    return make_unexpected(channel.peer_pid().error());  // moved from: as the Channel says it
  }
  int pidfd = -1;
  socklen_t length = sizeof(pidfd);
  if (::getsockopt(channel.fd(), SOL_SOCKET, SO_PEERPIDFD, &pidfd, &length) == 0) {
    return make_liveness(UniqueFd(pidfd));
  }
  if (errno != ENOPROTOOPT && errno != EINVAL) {
    const int err = errno;
    return make_unexpected(detail::system_error(kWho, "getsockopt(SO_PEERPIDFD)", err));
  }
  auto pid = channel.peer_pid();
  if (!pid) {
    return make_unexpected(std::move(pid.error()));
  }
  return watch_process(*pid);
}

}  // namespace holoscan::ipc
