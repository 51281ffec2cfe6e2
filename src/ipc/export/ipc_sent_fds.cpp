#include "ipc/export/ipc_sent_fds.hpp"

namespace holoscan::ipc::detail {

std::size_t SentFds::find(std::uint64_t allocation) const noexcept {
  for (std::size_t i = 0; i < count_; ++i) {
    if (entries_[i].allocation == allocation) {
      return i;
    }
  }
  return count_;
}

SentFds::Plan SentFds::plan(std::uint64_t allocation) const noexcept {
  if (allocation == 0) {
    return Plan{};
  }
  if (find(allocation) != count_) {
    return Plan{false, 0};
  }
  if (count_ < entries_.size()) {
    return Plan{};
  }
  // Full: the least recently published makes room, and the Publish tells the peer to unmap it.
  std::size_t oldest = 0;
  for (std::size_t i = 1; i < count_; ++i) {
    oldest = entries_[i].last_use < entries_[oldest].last_use ? i : oldest;
  }
  return Plan{true, entries_[oldest].allocation};
}

void SentFds::sent(std::uint64_t allocation, const Plan& plan, std::uint64_t export_id) noexcept {
  if (allocation == 0) {
    return;
  }
  const std::uint64_t now = ++clock_;
  if (!plan.attach_fd) {
    if (const std::size_t at = find(allocation); at != count_) {
      entries_[at].last_use = now;
    }
    return;
  }
  std::size_t at = plan.forget != 0 ? find(plan.forget) : count_;
  if (at == count_) {
    if (count_ == entries_.size()) {
      return;  // not planned here: left out, the next Publish carries the fd again
    }
    ++count_;
  }
  entries_[at] = Entry{allocation, export_id, now};
}

void SentFds::refused(std::uint64_t allocation, std::uint64_t export_id) noexcept {
  const std::size_t at = find(allocation);
  if (at == count_ || export_id < entries_[at].fd_export) {
    return;
  }
  entries_[at] = entries_[--count_];
}

}  // namespace holoscan::ipc::detail
