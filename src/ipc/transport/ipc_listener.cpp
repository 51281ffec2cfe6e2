// Listener: a bound SOCK_SEQPACKET path. The listening socket is non-blocking, so that accept()
// after poll() cannot hang when the pending connection was aborted in between.
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "holoscan/ipc/channel.hpp"
#include "ipc/ipc_error.hpp"
#include "ipc/transport/ipc_poll.hpp"
#include "ipc/transport/ipc_socket.hpp"

namespace holoscan::ipc {
namespace {

constexpr const char* kWho = "ipc listener";

}  // namespace

Listener::Listener(UniqueFd socket, std::string path, std::int32_t owner) noexcept
    : socket_(std::move(socket)), path_(std::move(path)), owner_(owner) {}

Listener::Listener(Listener&& other) noexcept
    : socket_(std::move(other.socket_)), path_(std::move(other.path_)), owner_(other.owner_) {
  other.path_.clear();
  other.owner_ = 0;
}

Listener& Listener::operator=(Listener&& other) noexcept {
  if (this != &other) {
    unbind();
    socket_ = std::move(other.socket_);
    path_ = std::move(other.path_);
    owner_ = other.owner_;
    other.path_.clear();
    other.owner_ = 0;
  }
  return *this;
}

Listener::~Listener() { unbind(); }

void Listener::unbind() noexcept {
  if (!path_.empty() && owner_ == ::getpid()) {
    ::unlink(path_.c_str());
  }
  path_.clear();
  owner_ = 0;
  socket_.reset();
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
  if (::bind(socket.get(), reinterpret_cast<const sockaddr*>(&*address), sizeof(*address)) != 0) {
    const int err = errno;
    return make_unexpected(detail::system_error(kWho, ("bind(" + path + ")").c_str(), err));
  }
  Listener listener(std::move(socket), path, ::getpid());  // from here on the path is removed
  if (::listen(listener.fd(), SOMAXCONN) != 0) {
    return make_unexpected(detail::system_error(kWho, "listen", errno));
  }
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
    if (auto result = detail::wait_or_result<Channel>(socket_.get(), POLLIN, deadline, kWho)) {
      return std::move(*result);
    }
    UniqueFd socket(::accept4(socket_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (socket.valid()) {
      auto channel = Channel::make(std::move(socket));
      if (!channel) {
        return make_unexpected(std::move(channel.error()));
      }
      return std::optional<Channel>(std::move(*channel));
    }
    const int err = errno;
    if (err != EINTR && err != EAGAIN && err != EWOULDBLOCK && err != ECONNABORTED) {
      return make_unexpected(detail::system_error(kWho, "accept4", err));
    }
  }
}

}  // namespace holoscan::ipc
