// Channel: moves frames and descriptors over a connected SOCK_SEQPACKET socket. The socket stays
// in blocking mode (a peer that inherits it sees the usual semantics); every call here passes
// MSG_DONTWAIT and waits in poll(), so that timeouts hold and EINTR only restarts the wait.
#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <new>
#include <string>
#include <thread>
#include <variant>

#include "holoscan/ipc/channel.hpp"
#include "ipc/ipc_error.hpp"
#include "ipc/transport/ipc_identity.hpp"
#include "ipc/transport/ipc_poll.hpp"
#include "ipc/transport/ipc_record.hpp"
#include "ipc/transport/ipc_socket.hpp"
#include "ipc/wire/ipc_frame.hpp"

namespace holoscan::ipc {
namespace {

constexpr const char* kWho = "ipc channel";

// Room for more descriptors than any frame may carry, so that a peer sending too many is told
// how many it sent; the kernel drops (and closes) whatever does not fit and sets MSG_CTRUNC.
constexpr std::size_t kMaxReceivedFds = 4;

Error closed_error(const char* how) {
  return Error{kChannelClosed, std::string(kWho) + ": peer hung up (" + how + ")", 0};
}

Error invalid(const std::string& what) { return detail::invalid_argument(kWho, what); }

// A Channel moved from has no socket; poll() ignores a negative descriptor, so a wait on it would
// only end at its deadline, or never.
Error no_socket() { return invalid("no socket (this Channel was moved from)"); }

// recvmsg() returns 0 both at end-of-file and for an empty record; only a hung-up socket with
// nothing left queued is end-of-file. An empty record is then reported as an undersized frame.
bool peer_hung_up(int fd) noexcept {
  pollfd entry{fd, POLLIN | POLLRDHUP, 0};
  int queued = 0;
  return ::poll(&entry, 1, 0) == 1 && (entry.revents & (POLLHUP | POLLRDHUP)) != 0 &&
         ::ioctl(fd, FIONREAD, &queued) == 0 && queued == 0;
}

// Takes ownership of every descriptor in the control data before anything else can fail.
struct ReceivedFds {
  std::array<UniqueFd, kMaxReceivedFds> fds;
  std::size_t count = 0;
  std::int32_t sender_pid = 0;   // SCM_CREDENTIALS (every record has them: SO_PASSCRED is on)
  bool foreign_control = false;  // a control message other than SCM_RIGHTS and SCM_CREDENTIALS

  void take(msghdr& msg) noexcept {
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS &&
          c->cmsg_len == CMSG_LEN(sizeof(ucred))) {
        ucred credentials{};
        std::memcpy(&credentials, CMSG_DATA(c), sizeof(credentials));
        sender_pid = credentials.pid;
        continue;
      }
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) {
        foreign_control = true;
        continue;
      }
      const std::size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (std::size_t i = 0; i < n; ++i) {
        int fd = -1;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        UniqueFd owned(fd);
        if (count < fds.size()) {
          fds[count] = std::move(owned);
        }
        ++count;  // counts every one; any past the array is closed by `owned` right here
      }
    }
  }
};

// Why a record is refused before its bytes are looked at; empty when it is not.
std::string record_refusal(int flags, const ReceivedFds& received) {
  if ((flags & MSG_CTRUNC) != 0 || received.count > kMaxReceivedFds) {
    // The kernel stops handing descriptors over at the first it cannot install (EMFILE), and
    // at the room the control buffer has, which a valid frame never fills.
    return received.count < kMaxReceivedFds
               ? "the kernel truncated its file descriptors (MSG_CTRUNC): this process could "
                 "not take them, e.g. at its descriptor limit (RLIMIT_NOFILE)"
               : "frame carried more file descriptors than any frame may";
  }
  if (received.foreign_control) {
    return "frame carried a control message other than SCM_RIGHTS and SCM_CREDENTIALS";
  }
  if ((flags & MSG_TRUNC) != 0) {
    return "frame is larger than the largest valid frame (" +
           std::to_string(detail::kMaxFrameBytes) + " bytes)";
  }
  return {};
}

// "publish of export N: " for a refused Publish whose descriptor names its export, else "".
std::string naming(const std::optional<std::uint64_t>& export_id) {
  return export_id ? "publish of export " + std::to_string(*export_id) + ": " : std::string();
}

}  // namespace

expected<std::pair<Channel, Channel>, Error> Channel::pair() {
  int sv[2] = {-1, -1};
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
    return make_unexpected(detail::system_error(kWho, "socketpair", errno));
  }
  auto first = make(UniqueFd(sv[0]));
  auto second = make(UniqueFd(sv[1]));
  if (!first || !second) {
    return make_unexpected(std::move(!first ? first.error() : second.error()));
  }
  return std::pair<Channel, Channel>(std::move(*first), std::move(*second));
}

expected<Channel, Error> Channel::make(UniqueFd socket) {
  // On before anything is received: a Hello proves its sender through the credentials.
  if (auto on = detail::receive_credentials(socket.get()); !on) {
    return make_unexpected(std::move(on.error()));
  }
  return Channel(std::move(socket));
}

namespace {

// A connect() to a listener whose backlog is full fails at once with EAGAIN on a non-blocking Unix
// socket (it is never in progress, so poll() cannot wait for it): tried again, resting a little
// longer each time, until it is taken or the deadline passes. The socket is left blocking, as
// every Channel's is.
expected<Channel, Error> connect_within(const std::string& path, const sockaddr_un& address,
                                        int timeout_ms) {
  UniqueFd socket(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!socket.valid()) {
    return make_unexpected(detail::system_error(kWho, "socket", errno));
  }
  const detail::Deadline deadline(timeout_ms);
  std::chrono::microseconds rest(50);
  while (::connect(socket.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) !=
         0) {
    if (errno == EINTR) {
      continue;
    }
    if (errno != EAGAIN) {
      return make_unexpected(detail::system_error(kWho, "connect", errno));
    }
    const int left_ms = deadline.remaining_ms();
    if (left_ms == 0) {
      return make_unexpected(ErrorCode::kTimeout, std::string(kWho) + ": connect to " + path +
                                                      ": the listener's backlog stayed full for " +
                                                      std::to_string(timeout_ms) + " ms");
    }
    std::this_thread::sleep_for(
        std::min<std::chrono::microseconds>(rest, std::chrono::milliseconds(left_ms)));
    rest = std::min<std::chrono::microseconds>(rest * 2, std::chrono::milliseconds(10));
  }
  const int flags = ::fcntl(socket.get(), F_GETFL);
  if (flags < 0 || ::fcntl(socket.get(), F_SETFL, flags & ~O_NONBLOCK) != 0) {
    return make_unexpected(detail::system_error(kWho, "fcntl", errno));
  }
  return Channel::adopt(std::move(socket));
}

}  // namespace

expected<Channel, Error> Channel::connect(const std::string& path, int timeout_ms) {
  auto address = detail::unix_address(path, kWho);
  if (!address) {
    return make_unexpected(std::move(address.error()));
  }
  if (timeout_ms >= 0) {
    return connect_within(path, *address, timeout_ms);
  }
  UniqueFd socket(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (!socket.valid()) {
    return make_unexpected(detail::system_error(kWho, "socket", errno));
  }
  // A Unix socket connects at once or waits for room in the listener's backlog; a signal ends that
  // wait with nothing under way (unlike TCP's, no connect goes on in the background), so the
  // connect is made again: otherwise the Channel would hold a socket that fails at its first send.
  while (::connect(socket.get(), reinterpret_cast<const sockaddr*>(&*address), sizeof(*address)) !=
         0) {
    if (errno == EISCONN) {
      break;
    }
    if (errno != EINTR) {
      return make_unexpected(detail::system_error(kWho, "connect", errno));
    }
  }
  return make(std::move(socket));
}

expected<Channel, Error> Channel::adopt(UniqueFd socket) {
  int domain = -1;
  int type = -1;
  socklen_t length = sizeof(int);
  // A socket never connected, or listening, has no peer (ENOTCONN): its first send or receive
  // would fail later, under another code. One whose peer already left still has one.
  sockaddr_un peer{};
  socklen_t peer_length = sizeof(peer);
  if (!socket.valid() || ::getsockopt(socket.get(), SOL_SOCKET, SO_DOMAIN, &domain, &length) != 0 ||
      ::getsockopt(socket.get(), SOL_SOCKET, SO_TYPE, &type, &length) != 0 || domain != AF_UNIX ||
      type != SOCK_SEQPACKET ||
      ::getpeername(socket.get(), reinterpret_cast<sockaddr*>(&peer), &peer_length) != 0) {
    return make_unexpected(invalid("adopt needs a connected AF_UNIX SOCK_SEQPACKET socket"));
  }
  // An inherited socket lost its close-on-exec to reach this process; a process this one starts
  // must not hold it, or the peer would not see this end hang up when this process goes.
  const int flags = ::fcntl(socket.get(), F_GETFD);
  if (flags < 0 || ::fcntl(socket.get(), F_SETFD, flags | FD_CLOEXEC) != 0) {
    return make_unexpected(detail::system_error(kWho, "fcntl", errno));
  }
  return make(std::move(socket));
}

expected<void, Error> Channel::send(const Message& message, int timeout_ms) {
  return std::visit([&](const auto& m) { return send(m, timeout_ms); }, message);
}

expected<void, Error> Channel::send(const Hello& hello, int timeout_ms) {
  auto pidfd = detail::own_pidfd();
  if (!pidfd) {
    return make_unexpected(std::move(pidfd.error()));
  }
  try {
    return send_frame(detail::encode_frame(hello), pidfd->get(), timeout_ms, /*credentials=*/true);
  } catch (const std::bad_alloc&) {
    return make_unexpected(detail::out_of_memory(kWho));  // a refusal's message
  }
}

expected<void, Error> Channel::send(const Publish& publish, int timeout_ms) {
  try {
    return send_frame(detail::encode_frame(publish), publish.fd.get(), timeout_ms);
  } catch (const std::bad_alloc&) {
    return make_unexpected(detail::out_of_memory(kWho));  // checking the descriptor decodes it
  }
}

expected<void, Error> Channel::send(const Release& release, int timeout_ms) {
  try {
    return send_frame(detail::encode_frame(release), -1, timeout_ms);
  } catch (const std::bad_alloc&) {
    return make_unexpected(detail::out_of_memory(kWho));  // a refusal's message
  }
}

expected<void, Error> Channel::send_frame(const expected<detail::Frame, Error>& frame, int fd,
                                          int timeout_ms, bool credentials) {
  try {
    if (!socket_.valid()) {
      return make_unexpected(no_socket());
    }
    if (!frame) {
      return make_unexpected(frame.error());  // a copy: the frame is the caller's
    }
    const detail::Deadline deadline(timeout_ms);
    for (;;) {
      const int err = detail::send_record_now(socket_.get(), *frame, fd, credentials);
      if (err == 0) {
        return {};
      }
      if (detail::hung_up(err)) {
        closed_ = true;
        return make_unexpected(closed_error("send"));
      }
      if (err != EAGAIN) {
        return make_unexpected(detail::system_error(kWho, "sendmsg", err));
      }
      auto room = detail::wait_ready(socket_.get(), POLLOUT, deadline, kWho);
      if (!room) {
        return make_unexpected(std::move(room.error()));
      }
      if (!*room) {
        return make_unexpected(ErrorCode::kNotReady,
                               std::string(kWho) + ": send timed out, the peer is not reading");
      }
    }
  } catch (const std::bad_alloc&) {
    return make_unexpected(detail::out_of_memory(kWho));  // building an error's message
  }
}

expected<std::optional<Message>, Error> Channel::receive(int timeout_ms) {
  const detail::Deadline deadline(timeout_ms);
  refused_export_.reset();  // also when nothing is read: the caller would give it back twice
  refused_allocation_ = 0;
  refused_forget_ = 0;
  if (!socket_.valid()) {
    try {
      return make_unexpected(no_socket());
    } catch (const std::bad_alloc&) {
      return make_unexpected(detail::out_of_memory(kWho));
    }
  }
  for (;;) {
    if (auto result = detail::wait_or_result<Message>(socket_.get(), POLLIN, deadline, kWho)) {
      return std::move(*result);
    }
    std::array<std::uint8_t, detail::kMaxFrameBytes> buffer;
    iovec iov{buffer.data(), buffer.size()};
    alignas(cmsghdr) char
        control[CMSG_SPACE(sizeof(ucred)) + CMSG_SPACE(sizeof(int) * kMaxReceivedFds)];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    const ssize_t n = ::recvmsg(socket_.get(), &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0) {
      const int err = errno;
      if (err == EINTR || err == EAGAIN || err == EWOULDBLOCK) {
        continue;  // interrupted, or another reader took the record: wait again
      }
      if (err == ECONNRESET) {
        // The peer closed its end with records of its own unread: the kernel reports that once,
        // ahead of the records still queued here (and clears it). They are read first; the end of
        // file comes after them.
        continue;
      }
      return make_unexpected(detail::system_error(kWho, "recvmsg", err));
    }
    ReceivedFds received;
    received.take(msg);
    const auto size = static_cast<std::size_t>(n);
    try {
      if (const std::string refusal = record_refusal(msg.msg_flags, received); !refusal.empty()) {
        note_refused(buffer.data(), size);
        return make_unexpected(invalid(naming(refused_export_) + refusal));
      }
      if (n == 0 && received.count == 0 && peer_hung_up(socket_.get())) {
        closed_ = true;
        return make_unexpected(closed_error("end of file"));
      }
      auto message = detail::parse_frame(buffer.data(), size, received.fds.data(), received.count);
      if (!message) {
        note_refused(buffer.data(), size);  // a wrong fd count
        return make_unexpected(std::move(message.error()));
      }
      if (auto* hello = std::get_if<Hello>(&*message)) {
        if (auto proven = detail::check_sender(hello->process, received.sender_pid); !proven) {
          return make_unexpected(std::move(proven.error()));
        }
      }
      return std::optional<Message>(std::move(*message));
    } catch (const std::bad_alloc&) {
      // The record is consumed: a Publish is named, so that its export can be given back.
      note_refused(buffer.data(), size);
      return make_unexpected(detail::out_of_memory(kWho));
    }
  }
}

void Channel::note_refused(const std::uint8_t* frame, std::size_t size) noexcept {
  refused_export_ = detail::publish_export_id(frame, size);
  const detail::PublishAllocations named = detail::publish_allocations(frame, size);
  refused_allocation_ = named.fd_allocation;
  refused_forget_ = named.forget;
}

expected<std::int32_t, Error> Channel::peer_pid() const {
  if (!socket_.valid()) {
    return make_unexpected(no_socket());  // as send() and receive() say it, not EBADF
  }
  ucred credentials{};
  socklen_t length = sizeof(credentials);
  if (::getsockopt(socket_.get(), SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) {
    return make_unexpected(detail::system_error(kWho, "getsockopt(SO_PEERCRED)", errno));
  }
  return std::int32_t{credentials.pid};
}

}  // namespace holoscan::ipc
