#include "ipc/transport/ipc_record.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace holoscan::ipc::detail {

namespace {

// Appends one control message to `msg` (whose control buffer has room for it).
void add_control(msghdr& msg, int type, const void* data, std::size_t bytes) noexcept {
  // Each message takes CMSG_SPACE bytes, so the next one starts aligned right after it.
  auto* c = reinterpret_cast<cmsghdr*>(static_cast<char*>(msg.msg_control) + msg.msg_controllen);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = type;
  c->cmsg_len = CMSG_LEN(bytes);
  std::memcpy(CMSG_DATA(c), data, bytes);
  msg.msg_controllen += CMSG_SPACE(bytes);
}

}  // namespace

int send_record_now(int socket, const Frame& frame, int fd, bool credentials) noexcept {
  iovec iov{const_cast<std::uint8_t*>(frame.bytes.data()), frame.size};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(ucred)) + CMSG_SPACE(sizeof(int))] = {};
  msg.msg_control = control;
  if (credentials) {
    // The kernel refuses a pid, uid or gid that is not the sender's own (unless it is root).
    const ucred own{::getpid(), ::getuid(), ::getgid()};
    add_control(msg, SCM_CREDENTIALS, &own, sizeof(own));
  }
  if (fd >= 0) {
    add_control(msg, SCM_RIGHTS, &fd, sizeof(fd));
  }
  if (msg.msg_controllen == 0) {
    msg.msg_control = nullptr;
  }
  for (;;) {
    // A record goes whole or not at all, so there is no partial send to resume.
    if (::sendmsg(socket, &msg, MSG_NOSIGNAL | MSG_DONTWAIT) >= 0) {
      return 0;
    }
    if (errno != EINTR) {
      return errno == EWOULDBLOCK ? EAGAIN : errno;
    }
  }
}

bool hung_up(int err) noexcept { return err == EPIPE || err == ECONNRESET || err == ENOTCONN; }

}  // namespace holoscan::ipc::detail
