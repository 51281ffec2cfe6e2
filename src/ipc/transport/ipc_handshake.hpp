#pragma once
// The start of every connection: both sides send Hello, and each learns which process is at the
// other end (the Hello's pidfd, proven on receipt: see ipc_identity.hpp).
#include "holoscan/expected.hpp"
#include "holoscan/ipc/channel.hpp"
#include "holoscan/ipc/message.hpp"

namespace holoscan::ipc::detail {

/**
 * @brief Sends this process's Hello as the `mine` end and waits up to `timeout_ms` for the peer's.
 *
 * kIncompatible when the peer speaks another protocol version, is the same end (two Exporters
 * would publish into a peer that never releases) or sends anything else first,
 * kPermissionDenied when its Hello does not prove its sender, kTimeout when nothing came in time,
 * kClosed when it hung up.
 */
expected<Hello, Error> exchange_hello(Channel& channel, int timeout_ms, const char* who,
                                      PeerRole mine);

}  // namespace holoscan::ipc::detail
