#pragma once
// The start of every connection: both sides send Hello, and each learns which process to watch.
#include <memory>

#include "holoscan/expected.hpp"
#include "holoscan/ipc_channel.hpp"
#include "holoscan/ipc_claims.hpp"
#include "holoscan/ipc_message.hpp"

namespace holoscan::ipc::detail {

/**
 * @brief Sends this process's Hello and waits up to `timeout_ms` for the peer's.
 *
 * kIncompatible when the peer speaks another protocol version or sends anything else first,
 * kTimeout when nothing came in time, kClosed when it hung up.
 */
expected<Hello, Error> exchange_hello(Channel& channel, int timeout_ms, const char* who);

/**
 * @brief Watches the process at the other end.
 *
 * The kernel's record (SO_PEERPIDFD, SO_PEERCRED) names the process that connected; a channel
 * made by Channel::pair() names this process on both ends, so when it does the Hello's pid is
 * watched instead (a child forked with the other end, which cannot reuse a pid before it is
 * reaped).
 */
expected<std::unique_ptr<PeerLiveness>, Error> watch_hello_peer(const Channel& channel,
                                                                const Hello& hello);

}  // namespace holoscan::ipc::detail
