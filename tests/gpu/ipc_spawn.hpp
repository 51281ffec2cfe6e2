#pragma once
// Starting an importer in another process for the cross-process GPU tests: fork, then exec of the
// peer binary (holoscan_dlpack_ipc_peer) with its end of a channel, so that the child has a CUDA
// context of its own (a forked child cannot use the parent's).
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "holoscan/ipc/channel.hpp"

namespace holoscan::test {

/** @brief A peer process and the parent's end of its channel. */
struct SpawnedPeer {
  pid_t pid = -1;                       ///< The child.
  std::optional<ipc::Channel> channel;  ///< The parent's end, for Exporter::add_peer.
  int signal_fd = -1;  ///< Read end of a pipe the peer writes one byte to when told.
};

/**
 * @brief Starts the peer binary with `arguments` (key=value words, see ipc_peer_main.cpp);
 *        `environment` entries (NAME=value) are added to the child's environment.
 */
SpawnedPeer spawn_peer(const std::vector<std::string>& arguments,
                       const std::vector<std::string>& environment = {});

/** @brief Waits up to `timeout_ms` for the peer to exit; its exit status, or -1 (killed). */
int wait_peer(pid_t pid, int timeout_ms);

/** @brief Where the peer binary is. */
const char* peer_binary();

}  // namespace holoscan::test
