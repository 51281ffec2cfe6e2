#include "support/ipc_raw_socket.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include <gtest/gtest.h>

#include "holoscan/ipc/channel.hpp"

namespace holoscan::test {

std::vector<std::uint8_t> raw_frame(const ipc::Message& message) {
  auto ends = ipc::Channel::pair();
  EXPECT_TRUE(ends.has_value());
  if (!ends || !ends->first.send(message, 0)) {
    ADD_FAILURE() << "could not send the message to capture its frame";
    return {};
  }
  std::vector<std::uint8_t> bytes(4096);
  const ssize_t n = ::recv(ends->second.fd(), bytes.data(), bytes.size(), MSG_DONTWAIT);
  bytes.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  return bytes;
}

bool send_raw(int fd, const std::vector<std::uint8_t>& bytes, const std::vector<int>& fds) {
  iovec iov{const_cast<std::uint8_t*>(bytes.data()), bytes.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  std::vector<char> control(CMSG_SPACE(sizeof(int) * fds.size()));
  if (!fds.empty()) {
    msg.msg_control = control.data();
    msg.msg_controllen = control.size();
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  return ::sendmsg(fd, &msg, MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
}

std::vector<ipc::UniqueFd> receive_fds(int fd, int timeout_ms) {
  std::vector<ipc::UniqueFd> fds;
  pollfd entry{fd, POLLIN, 0};
  if (::poll(&entry, 1, timeout_ms) != 1) {
    return fds;
  }
  char byte = 0;
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 8)];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  if (::recvmsg(fd, &msg, MSG_CMSG_CLOEXEC) < 0) {
    return fds;
  }
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      for (std::size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); ++i) {
        int received = -1;
        std::memcpy(&received, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        fds.emplace_back(received);
      }
    }
  }
  return fds;
}

int open_fd_count() {
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) {
    ADD_FAILURE() << "cannot read /proc/self/fd";
    return -1;
  }
  int count = 0;
  while (const dirent* entry = ::readdir(dir)) {
    count += entry->d_name[0] != '.' ? 1 : 0;
  }
  ::closedir(dir);
  return count;
}

DescriptorLimit::DescriptorLimit() {
  rlimit limit{};
  const int lowest_free = ::fcntl(0, F_DUPFD_CLOEXEC, 0);
  if (lowest_free < 0 || ::close(lowest_free) != 0 || ::getrlimit(RLIMIT_NOFILE, &limit) != 0) {
    ADD_FAILURE() << "cannot find the lowest free descriptor or the descriptor limit";
    return;
  }
  soft_ = limit.rlim_cur;
  limit.rlim_cur = static_cast<rlim_t>(lowest_free);
  lowered_ = ::setrlimit(RLIMIT_NOFILE, &limit) == 0;
  EXPECT_TRUE(lowered_) << "cannot lower RLIMIT_NOFILE";
}

DescriptorLimit::~DescriptorLimit() {
  rlimit limit{};
  if (lowered_ && ::getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    limit.rlim_cur = static_cast<rlim_t>(soft_);
    EXPECT_EQ(::setrlimit(RLIMIT_NOFILE, &limit), 0) << "cannot restore RLIMIT_NOFILE";
  }
}

}  // namespace holoscan::test
