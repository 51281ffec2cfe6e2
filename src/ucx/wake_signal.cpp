// The signal stays readable until the last thread asleep when it was posted is back, so each of
// them wakes (poll is level-triggered); a thread that goes to sleep later sees it too. Only those
// asleep at the post are waited for: counting every sleeper, the signal stayed readable for as
// long as two waiters took turns (one back to sleep before the other was out), and both spun.
#include "wake_signal.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdint>

namespace holoscan::ucx::detail {

WakeSignal::WakeSignal() noexcept : fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}

WakeSignal::~WakeSignal() {
  if (fd_ >= 0) {
    (void)close(fd_);
  }
}

void WakeSignal::leave_sleep(std::uint64_t ticket) noexcept {
  if (!posted_ || ticket == posts_) {  // asleep since the last post (or none is pending)
    if (sleeping_ > 0) {
      --sleeping_;
    }
    return;
  }
  if (owed_ > 0 && --owed_ == 0) {
    std::uint64_t count = 0;
    const ssize_t drained = read(fd_, &count, sizeof(count));  // nothing to do if it fails
    (void)drained;
    posted_ = false;
  }
}

void WakeSignal::post() noexcept {
  if (sleeping_ == 0 || fd_ < 0) {
    return;
  }
  if (!posted_) {
    const std::uint64_t one = 1;
    if (write(fd_, &one, sizeof(one)) != static_cast<ssize_t>(sizeof(one))) {
      return;
    }
    posted_ = true;
  }
  // Still readable from an earlier post: those asleep since are owed this one too, so that the
  // earlier sleepers' return does not clear it under them.
  owed_ += sleeping_;
  sleeping_ = 0;
  ++posts_;
}

}  // namespace holoscan::ucx::detail
