#include "event_loop_fd.hpp"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <string>
#include <system_error>
#include <utility>

namespace holoscan::ucx::detail {
namespace {

unexpected<Error> system_error(const char* call, int error) {
  return make_unexpected(
      error == EMFILE || error == ENFILE || error == ENOMEM ? ErrorCode::kResourceExhausted
                                                            : ErrorCode::kFailure,
      // generic_category() words errno without strerror()'s shared buffer.
      std::string("ucx worker: ") + call + " failed: " + std::generic_category().message(error));
}

bool watch(int epoll, int fd) noexcept {
  epoll_event event{};
  event.events = EPOLLIN;  // level-triggered: readable for as long as `fd` is
  event.data.fd = fd;
  return epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &event) == 0;
}

}  // namespace

expected<EventLoopFd, Error> EventLoopFd::make(int ucx_efd) {
  EventLoopFd made;
  made.epoll_ = epoll_create1(EPOLL_CLOEXEC);
  if (made.epoll_ < 0) {
    return system_error("epoll_create1", errno);
  }
  made.signal_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (made.signal_ < 0) {
    return system_error("eventfd", errno);
  }
  if (!watch(made.epoll_, ucx_efd) || !watch(made.epoll_, made.signal_)) {
    return system_error("epoll_ctl", errno);
  }
  return made;
}

EventLoopFd::~EventLoopFd() { close_all(); }

EventLoopFd::EventLoopFd(EventLoopFd&& other) noexcept
    : epoll_(std::exchange(other.epoll_, -1)), signal_(std::exchange(other.signal_, -1)) {}

EventLoopFd& EventLoopFd::operator=(EventLoopFd&& other) noexcept {
  if (this != &other) {
    close_all();
    epoll_ = std::exchange(other.epoll_, -1);
    signal_ = std::exchange(other.signal_, -1);
  }
  return *this;
}

void EventLoopFd::close_all() noexcept {
  for (int* fd : {&epoll_, &signal_}) {
    if (*fd >= 0) {
      (void)close(*fd);
      *fd = -1;
    }
  }
}

void EventLoopFd::signal() noexcept {
  const std::uint64_t one = 1;
  const ssize_t written = write(signal_, &one, sizeof(one));  // only an overflowed count fails
  (void)written;
}

bool EventLoopFd::take_signal() noexcept {
  std::uint64_t count = 0;
  return read(signal_, &count, sizeof(count)) == static_cast<ssize_t>(sizeof(count)) && count > 0;
}

}  // namespace holoscan::ucx::detail
