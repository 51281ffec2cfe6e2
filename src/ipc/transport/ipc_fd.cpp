#include <unistd.h>

#include "holoscan/ipc/fd.hpp"

namespace holoscan::ipc {

void UniqueFd::reset(int fd) noexcept {
  if (fd_ >= 0 && fd_ != fd) {
    // Linux releases the descriptor even when close() reports EINTR; a retry could close a
    // descriptor another thread has just been given.
    ::close(fd_);
  }
  fd_ = fd < 0 ? -1 : fd;
}

}  // namespace holoscan::ipc
