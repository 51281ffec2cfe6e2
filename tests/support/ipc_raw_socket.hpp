#pragma once
// Raw socket access for the channel tests: the exact bytes a Channel sends, records sent past
// it (to play a hostile peer), and a count of open descriptors to catch leaks.
#include <cstdint>
#include <vector>

#include "holoscan/ipc_message.hpp"

namespace holoscan::test {

/** @brief The exact frame bytes Channel::send() writes for `message`. */
std::vector<std::uint8_t> raw_frame(const ipc::Message& message);

/** @brief Sends one record of `bytes` on socket `fd` with `fds` attached; false on failure. */
bool send_raw(int fd, const std::vector<std::uint8_t>& bytes, const std::vector<int>& fds = {});

/** @brief How many descriptors this process has open (entries of /proc/self/fd). */
int open_fd_count();

}  // namespace holoscan::test
