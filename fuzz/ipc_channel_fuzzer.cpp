// libFuzzer target for Channel::receive over a real socket pair: whatever records another process
// sends, each with descriptors attached or not, and whether it then hangs up, receive() must
// never crash, wait, or leak a descriptor; every refusal must be one that leaves the channel
// usable (kInvalidArgument, kIncompatible, kPermissionDenied), each record read at most once; and
// once the sender hung up, every record it sent with bytes in it is read (as a message or a
// refusal) before the end of file (empty ones at the end read like it).
//
// Input (odd sizes first leave a record unread by the sender, whose hang-up then resets the
// connection): records, each a control byte (bits 0-2: descriptors attached, 0..7, more than the
// channel takes included; bit 7: the sender hangs up after this record), a length byte (the
// payload's length is it times 4, plus the control byte's bits 3-4: up to 1023 bytes, past the
// largest frame), then the payload (what is left when the input runs short).
#include <dirent.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "holoscan/ipc/channel.hpp"

namespace {

using holoscan::ErrorCode;
namespace ipc = holoscan::ipc;

constexpr std::size_t kMaxRecords = 32;  // well within a socket pair's queue

// Descriptors open in this process.
int open_fd_count() {
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) {
    __builtin_trap();
  }
  int count = 0;
  while (::readdir(dir) != nullptr) {
    ++count;
  }
  ::closedir(dir);
  return count;
}

// Sends one record with `fd_count` descriptors (the read end of a fresh pipe, repeated) without
// waiting; false when the socket cannot take it now.
bool send_record(int socket, const std::uint8_t* payload, std::size_t size, int fd_count) {
  int ends[2] = {-1, -1};
  if (fd_count > 0 && ::pipe2(ends, O_CLOEXEC) != 0) {
    return false;
  }
  std::vector<int> fds(static_cast<std::size_t>(fd_count), ends[0]);
  iovec iov{const_cast<std::uint8_t*>(payload), size};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  std::vector<char> control(CMSG_SPACE(sizeof(int) * 8), 0);
  if (fd_count > 0) {
    msg.msg_control = control.data();
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* header = CMSG_FIRSTHDR(&msg);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(header), fds.data(), sizeof(int) * fds.size());
  }
  const bool sent = ::sendmsg(socket, &msg, MSG_DONTWAIT | MSG_NOSIGNAL) >= 0;
  if (fd_count > 0) {
    ::close(ends[0]);
    ::close(ends[1]);
  }
  return sent;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const int fds_before = open_fd_count();
  {
    auto ends = ipc::Channel::pair();
    if (!ends) {
      __builtin_trap();
    }
    ipc::Channel receiver = std::move(ends->first);
    std::optional<ipc::Channel> sender(std::move(ends->second));
    // An odd input leaves a record unread in the sender's queue: its hang-up then makes the kernel
    // report ECONNRESET to the receiver ahead of what is still queued there.
    if (size % 2 == 1 && !receiver.send(ipc::Release{1, false, {}}, 0)) {
      __builtin_trap();
    }
    std::size_t sent = 0;
    std::size_t sent_with_bytes = 0;  // empty records after which nothing else is queued read
                                      // like the end of file of a hung-up peer (recvmsg gives 0)
    bool hung_up = false;
    std::size_t at = 0;
    while (at + 2 <= size && sent < kMaxRecords && !hung_up) {
      const std::uint8_t control = data[at];
      const std::size_t wanted = data[at + 1] * 4u + ((control >> 3) & 3u);
      at += 2;
      const std::size_t length = wanted < size - at ? wanted : size - at;
      if (!send_record(sender->fd(), data + at, length, control & 7)) {
        break;
      }
      at += length;
      ++sent;
      sent_with_bytes += length > 0 ? 1 : 0;
      if ((control & 0x80) != 0) {
        sender.reset();  // the other end hangs up
        hung_up = true;
      }
    }
    std::size_t read = 0;
    for (;;) {
      auto got = receiver.receive(0);
      if (got && !*got) {
        if (hung_up) {
          __builtin_trap();  // a hung-up peer reads as nothing waiting: its end was never seen
        }
        break;  // nothing more queued
      }
      if (!got && got.error().code == ErrorCode::kClosed) {
        if (!hung_up || read < sent_with_bytes || read > sent || !receiver.closed()) {
          __builtin_trap();  // the end of file before every record, or without a hang-up
        }
        break;
      }
      if (!got) {
        const ErrorCode code = got.error().code;
        if ((code != ErrorCode::kInvalidArgument && code != ErrorCode::kIncompatible &&
             code != ErrorCode::kPermissionDenied) ||
            got.error().message.empty() || receiver.closed()) {
          __builtin_trap();  // a refusal that did not leave the channel usable
        }
      }
      if (++read > sent) {
        __builtin_trap();  // more came out than went in
      }
    }
    if (!hung_up && read != sent) {
      __builtin_trap();  // a record was lost while the sender lived
    }
  }
  if (open_fd_count() != fds_before) {
    __builtin_trap();  // a descriptor that came with a record was kept
  }
  return 0;
}
