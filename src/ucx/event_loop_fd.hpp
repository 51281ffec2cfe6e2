#pragma once
// The descriptor an application's event loop sleeps on (Worker::fd()): UCX's event fd and a
// signal of the worker's own, in one epoll set. The worker wakes the loop through its own signal
// rather than ucp_worker_signal, which writes UCX's fd: the next ucp_worker_arm of any thread (a
// wait inside accept(), connect() or receive()) read that back, and the loop slept on.
#include "holoscan/expected.hpp"

namespace holoscan::ucx::detail {

/** @brief An epoll set of UCX's event fd and an eventfd that signal() makes readable. */
class EventLoopFd {
 public:
  /** @brief The set over `ucx_efd` (which stays UCX's); kResourceExhausted without fds. Out
   *         of host memory for the error's text, throws std::bad_alloc. */
  static expected<EventLoopFd, Error> make(int ucx_efd);

  /** @brief No descriptors: fd() is -1. */
  EventLoopFd() noexcept = default;
  ~EventLoopFd();
  /** @brief Takes `other`'s descriptors; `other` is left without. */
  EventLoopFd(EventLoopFd&& other) noexcept;
  /** @brief Closes this set's descriptors, then takes `other`'s. */
  EventLoopFd& operator=(EventLoopFd&& other) noexcept;
  EventLoopFd(const EventLoopFd&) = delete;
  EventLoopFd& operator=(const EventLoopFd&) = delete;

  /** @brief The epoll descriptor: readable when UCX's fd is, or after signal(). */
  int fd() const noexcept { return epoll_; }
  /** @brief Makes fd() readable until the next take_signal(). */
  void signal() noexcept;
  /** @brief Whether signal() came since the last call; the signal is cleared either way. */
  bool take_signal() noexcept;

 private:
  void close_all() noexcept;

  int epoll_ = -1;
  int signal_ = -1;
};

}  // namespace holoscan::ucx::detail
