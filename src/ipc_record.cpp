#include "ipc_record.hpp"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace holoscan::ipc::detail {

int send_record_now(int socket, const Frame& frame, int fd) noexcept {
  iovec iov{const_cast<std::uint8_t*>(frame.bytes.data()), frame.size};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  if (fd >= 0) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
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
