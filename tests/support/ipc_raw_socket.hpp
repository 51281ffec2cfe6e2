#pragma once
// Raw socket access for the channel tests: the exact bytes a Channel sends, records sent past
// it (to play a hostile peer), and a count of open descriptors to catch leaks.
#include <cstdint>
#include <vector>

#include "holoscan/ipc/fd.hpp"
#include "holoscan/ipc/message.hpp"

namespace holoscan::test {

/** @brief The exact frame bytes Channel::send() writes for `message`. */
std::vector<std::uint8_t> raw_frame(const ipc::Message& message);

/** @brief Sends one record of `bytes` on socket `fd` with `fds` attached; false on failure. */
bool send_raw(int fd, const std::vector<std::uint8_t>& bytes, const std::vector<int>& fds = {});

/** @brief The descriptors that came with the next record on socket `fd` (waiting up to
 *         `timeout_ms`); empty when none came. */
std::vector<ipc::UniqueFd> receive_fds(int fd, int timeout_ms);

/** @brief How many descriptors this process has open (entries of /proc/self/fd). */
int open_fd_count();

/**
 * @brief While alive, this process cannot open one more descriptor: RLIMIT_NOFILE's soft limit is
 *        the lowest free descriptor number. Restores the limit when it goes.
 */
class DescriptorLimit {
 public:
  /** @brief Lowers the limit (fails the test when it cannot). */
  DescriptorLimit();
  /** @brief Restores the limit. */
  ~DescriptorLimit();
  DescriptorLimit(const DescriptorLimit&) = delete;
  DescriptorLimit& operator=(const DescriptorLimit&) = delete;

 private:
  unsigned long long soft_ = 0;
  bool lowered_ = false;
};

}  // namespace holoscan::test
