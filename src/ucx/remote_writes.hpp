#pragma once
// Whether the peer of an endpoint may write into this side's memory itself. A rendezvous whose
// sender puts the data (CUDA IPC between processes of one host, RDMA across hosts) is completed
// here with an error as soon as the connection fails, while the sender's copy may still be
// running: UCX has no point on this side that follows it. Memory such a landing named is kept
// until the process exits rather than reused (docs/ucx.md, "Failure").
#include <string_view>

#include <ucp/api/ucp.h>

namespace holoscan::ucx::detail {

/** @brief Whether a UCX transport (by its name) only ever has this process write its memory:
 *         sockets, shared-memory FIFOs, loopback, local CUDA copies. Unknown names are not. */
bool writes_only_locally(std::string_view transport) noexcept;

/** @brief Whether a peer may write into this side's memory through `endpoint`'s transports
 *         (true also when UCX cannot say, or names more transports than can be read). */
bool peer_may_write_remotely(ucp_ep_h endpoint) noexcept;

}  // namespace holoscan::ucx::detail
