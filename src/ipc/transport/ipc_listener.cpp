// Listener: a bound SOCK_SEQPACKET path. The listening socket is non-blocking, so that accept()
// after poll() cannot hang when the pending connection was aborted in between.
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <string>

#include "holoscan/ipc/channel.hpp"
#include "ipc/ipc_error.hpp"
#include "ipc/transport/ipc_poll.hpp"
#include "ipc/transport/ipc_socket.hpp"

namespace holoscan::ipc {
namespace {

constexpr const char* kWho = "ipc listener";

// A socket bound to `address` (`path`) and listening, or errno and the call that failed.
int bind_and_listen(int socket, const std::string& path, const sockaddr_un& address,
                    std::string& failed) {
  if (::bind(socket, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    failed = "bind(" + path + ")";
    return errno;
  }
  if (::listen(socket, SOMAXCONN) != 0) {
    const int err = errno;  // bound but never a Listener, which would remove the path
    failed = "listen";
    ::unlink(path.c_str());
    return err;
  }
  return 0;
}

// Listens on `socket` at `path` such that a peer that finds `path` finds a listening socket: bound
// to `path` itself, the name would exist between bind() and listen(), and a peer that connected
// then (one started at the same time, waiting for the path to appear) would be refused. So the
// socket is bound to a name of its own in the same folder, listens, and `path` is made a second
// link to it, which fails if `path` is taken, as bind() does. Where that name cannot be used (too
// long, taken) the socket is bound to `path` itself. Returns errno, and the call in `failed`.
int listen_at(int socket, const std::string& path, const sockaddr_un& address,
              std::string& failed) {
  static std::atomic<unsigned> next{0};
  const std::string staging =
      path + ".listening-" + std::to_string(::getpid()) + "-" + std::to_string(next++);
  auto staged = detail::unix_address(staging, kWho);
  if (!staged || ::bind(socket, reinterpret_cast<const sockaddr*>(&*staged), sizeof(*staged)) != 0) {
    return bind_and_listen(socket, path, address, failed);
  }
  if (::listen(socket, SOMAXCONN) != 0) {
    const int err = errno;
    ::unlink(staging.c_str());
    failed = "listen";
    return err;
  }
  const int linked = ::link(staging.c_str(), path.c_str()) == 0 ? 0 : errno;
  ::unlink(staging.c_str());
  if (linked == EEXIST) {
    failed = "bind(" + path + ")";
    return EADDRINUSE;  // bind()'s answer for a taken path, under bind()'s name
  }
  if (linked != 0) {
    failed = "link(" + path + ")";
  }
  return linked;
}

}  // namespace

Listener::Listener(UniqueFd socket, std::string path, std::int32_t owner) noexcept
    : socket_(std::move(socket)), path_(std::move(path)), owner_(owner) {
  struct stat bound {};
  if (!path_.empty() && ::stat(path_.c_str(), &bound) == 0) {
    bound_device_ = static_cast<std::uint64_t>(bound.st_dev);
    bound_inode_ = static_cast<std::uint64_t>(bound.st_ino);
  } else {
    path_removed_.store(true, std::memory_order_relaxed);  // gone already: nothing to remove
  }
}

Listener::Listener(Listener&& other) noexcept
    : socket_(std::move(other.socket_)),
      path_(std::move(other.path_)),
      owner_(other.owner_),
      bound_device_(other.bound_device_),
      bound_inode_(other.bound_inode_),
      stopped_(other.stopped_.load(std::memory_order_acquire)),
      path_removed_(other.path_removed_.load(std::memory_order_acquire)) {
  other.path_.clear();
  other.owner_ = 0;
}

Listener& Listener::operator=(Listener&& other) noexcept {
  if (this != &other) {
    unbind();
    socket_ = std::move(other.socket_);
    path_ = std::move(other.path_);
    owner_ = other.owner_;
    bound_device_ = other.bound_device_;
    bound_inode_ = other.bound_inode_;
    stopped_.store(other.stopped_.load(std::memory_order_acquire), std::memory_order_release);
    path_removed_.store(other.path_removed_.load(std::memory_order_acquire),
                        std::memory_order_release);
    other.path_.clear();
    other.owner_ = 0;
  }
  return *this;
}

Listener::~Listener() { unbind(); }

// Once, in the process that bound it, and only while the path still names the socket bound: a
// listener closed late (a call on another thread kept it) must not remove the path of one
// listening there since. (A path replaced between the check and the unlink is a race no name-based
// removal can close; the check narrows it to that instant.)
void Listener::remove_path_once() noexcept {
  if (path_.empty() || owner_ != ::getpid() ||
      path_removed_.exchange(true, std::memory_order_acq_rel)) {
    return;
  }
  struct stat now {};
  if (::stat(path_.c_str(), &now) == 0 && static_cast<std::uint64_t>(now.st_dev) == bound_device_ &&
      static_cast<std::uint64_t>(now.st_ino) == bound_inode_) {
    ::unlink(path_.c_str());
  }
}

void Listener::unbind() noexcept {
  remove_path_once();
  path_.clear();
  owner_ = 0;
  socket_.reset();
}

// shutdown() of a listening socket refuses new connects (ECONNREFUSED) and wakes a poll() under
// way; accept() then fails with EINVAL, which the flag turns into kClosed.
void Listener::stop() noexcept {
  stopped_.store(true, std::memory_order_release);
  // shutdown() acts on the socket, which a forked child shares with the process that bound it:
  // a child's stop() stops only its own copy.
  if (socket_.valid() && owner_ == ::getpid()) {
    (void)::shutdown(socket_.get(), SHUT_RDWR);
  }
  remove_path_once();
}

expected<Listener, Error> Listener::listen(const std::string& path) {
  auto address = detail::unix_address(path, kWho);
  if (!address) {
    return make_unexpected(std::move(address.error()));
  }
  UniqueFd socket(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!socket.valid()) {
    return make_unexpected(detail::system_error(kWho, "socket", errno));
  }
  std::string failed;
  if (const int err = listen_at(socket.get(), path, *address, failed); err != 0) {
    return make_unexpected(detail::system_error(kWho, failed.c_str(), err));
  }
  Listener listener(std::move(socket), path, ::getpid());  // from here on the path is removed
  return listener;
}

expected<std::optional<Channel>, Error> Listener::accept(int timeout_ms) {
  if (!socket_.valid()) {
    // poll() ignores a negative descriptor: the wait would only end at its deadline, or never.
    return make_unexpected(
        detail::invalid_argument(kWho, "no socket (this Listener was moved from)"));
  }
  const detail::Deadline deadline(timeout_ms);
  for (;;) {
    if (stopped_.load(std::memory_order_acquire)) {
      return make_unexpected(ErrorCode::kClosed, std::string(kWho) + ": stopped");
    }
    if (auto result = detail::wait_or_result<Channel>(socket_.get(), POLLIN, deadline, kWho)) {
      return std::move(*result);
    }
    UniqueFd socket(::accept4(socket_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (socket.valid() && stopped_.load(std::memory_order_acquire)) {
      continue;  // taken from the backlog as stop() ran: closed here, kClosed above
    }
    if (socket.valid()) {
      auto channel = Channel::make(std::move(socket));
      if (!channel) {
        return make_unexpected(std::move(channel.error()));
      }
      return std::optional<Channel>(std::move(*channel));
    }
    const int err = errno;
    if (stopped_.load(std::memory_order_acquire)) {
      continue;  // stop() shut the socket down under this wait: kClosed above
    }
    if (err != EINTR && err != EAGAIN && err != EWOULDBLOCK && err != ECONNABORTED) {
      return make_unexpected(detail::system_error(kWho, "accept4", err));
    }
  }
}

}  // namespace holoscan::ipc
