#include "ipc/finish_stamps.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>

namespace ipc_demo {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

FinishStamps::~FinishStamps() {
  for (int fd : {read_fd_, write_fd_}) {
    if (fd >= 0) {
      (void)::close(fd);
    }
  }
}

bool FinishStamps::open() {
  int ends[2] = {-1, -1};
  // Close-on-exec: spawn() keeps only the descriptors it is given open in a child.
  if (::pipe2(ends, O_CLOEXEC | O_NONBLOCK) != 0) {
    return false;
  }
  read_fd_ = ends[0];
  write_fd_ = ends[1];
  return true;
}

std::optional<Clock::time_point> FinishStamps::latest(int writers) {
  if (read_fd_ < 0) {
    return std::nullopt;
  }
  // Every writer has exited: what they wrote is all in the pipe (a stamp is one atomic write).
  std::int64_t latest_ns = 0;
  int stamps = 0;
  std::int64_t ns = 0;
  while (::read(read_fd_, &ns, sizeof(ns)) == static_cast<ssize_t>(sizeof(ns))) {
    latest_ns = std::max(latest_ns, ns);
    ++stamps;
  }
  if (stamps != writers || stamps == 0) {
    return std::nullopt;
  }
  return Clock::time_point(std::chrono::duration_cast<Clock::duration>(
      std::chrono::nanoseconds(latest_ns)));
}

void FinishStamps::write(int fd) {
  if (fd < 0) {
    return;
  }
  const std::int64_t ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
          .count();
  (void)!::write(fd, &ns, sizeof(ns));
  (void)::close(fd);
}

}  // namespace ipc_demo
