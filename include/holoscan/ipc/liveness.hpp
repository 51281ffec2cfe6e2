#pragma once
/**
 * @file
 * @brief PeerLiveness for a real process: a pidfd that turns readable once the process has exited.
 */
#include <cstdint>
#include <memory>

#include "holoscan/expected.hpp"
#include "holoscan/ipc/channel.hpp"
#include "holoscan/ipc/claims.hpp"

namespace holoscan::ipc {

/** @brief Watches process `pid` (Linux 5.3+); open it while the peer is known alive and connected.
 */
HOLOSCAN_DLPACK_API expected<std::unique_ptr<PeerLiveness>, Error> watch_process(std::int32_t pid);

/**
 * @brief Watches the process `pidfd` names, e.g. the Hello's (Hello::process): the process that
 *        proved it speaks on the channel. kInvalidArgument without a descriptor, or for one
 *        that is no pidfd (its readiness would say nothing of a process); it is closed then.
 */
HOLOSCAN_DLPACK_API expected<std::unique_ptr<PeerLiveness>, Error> watch_pidfd(UniqueFd pidfd);

/**
 * @brief Watches the process that connected `channel`, as the kernel recorded it.
 *
 * Uses SO_PEERPIDFD (Linux 6.5+), which names the very process that connected, so no reuse of its
 * pid can intervene; falls back to watch_process(peer_pid()) on older kernels. That is the process
 * that made the connection, not necessarily the one that uses it (a launcher may create a pair
 * and hand the ends on; for Channel::pair() both ends name the creating process): Exporter
 * watches the Hello's process instead (watch_pidfd). kInvalidArgument on a Channel moved from.
 */
HOLOSCAN_DLPACK_API expected<std::unique_ptr<PeerLiveness>, Error> watch_peer(
    const Channel& channel);

}  // namespace holoscan::ipc
