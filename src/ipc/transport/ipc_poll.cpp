#include "ipc/transport/ipc_poll.hpp"

#include <poll.h>

#include <cerrno>

#include "ipc/ipc_error.hpp"

namespace holoscan::ipc::detail {

Deadline::Deadline(int timeout_ms) noexcept
    : unlimited_(timeout_ms < 0),
      end_(std::chrono::steady_clock::now() +
           std::chrono::milliseconds(timeout_ms < 0 ? 0 : timeout_ms)) {}

int Deadline::remaining_ms() const noexcept {
  if (unlimited_) {
    return -1;
  }
  const auto left = end_ - std::chrono::steady_clock::now();
  if (left <= std::chrono::steady_clock::duration::zero()) {
    return 0;
  }
  // Round up, so that a wait never ends just before the deadline and reports a timeout early.
  return static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(left).count());
}

expected<bool, Error> wait_ready(int fd, short events, const Deadline& deadline, const char* who,
                                 int also) {
  for (;;) {
    pollfd entries[2] = {{fd, events, 0}, {also, POLLIN, 0}};
    const int ready = ::poll(entries, also >= 0 ? 2 : 1, deadline.remaining_ms());
    if (ready > 0) {
      return true;
    }
    if (ready == 0) {
      return false;
    }
    if (errno != EINTR) {
      return make_unexpected(system_error(who, "poll", errno));
    }
  }
}

}  // namespace holoscan::ipc::detail
