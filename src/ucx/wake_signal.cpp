// The signal stays readable until the last sleeper is back, so every thread asleep when it was
// posted wakes (poll is level-triggered), and a thread that goes to sleep later sees it too.
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

void WakeSignal::leave_sleep() noexcept {
  if (sleepers_ > 0) {
    --sleepers_;
  }
  if (sleepers_ == 0 && posted_) {
    std::uint64_t count = 0;
    const ssize_t drained = read(fd_, &count, sizeof(count));  // nothing to do if it fails
    (void)drained;
    posted_ = false;
  }
}

void WakeSignal::post() noexcept {
  if (sleepers_ == 0 || posted_ || fd_ < 0) {
    return;
  }
  const std::uint64_t one = 1;
  posted_ = write(fd_, &one, sizeof(one)) == static_cast<ssize_t>(sizeof(one));
}

}  // namespace holoscan::ucx::detail
