#pragma once
// One record on a SOCK_SEQPACKET socket, sent without waiting and without allocating: what
// Channel::send waits around, and what the importer's queue of Releases sends from any thread.
#include "ipc/wire/ipc_frame.hpp"

namespace holoscan::ipc::detail {

/**
 * @brief Sends `frame` (with `fd` by SCM_RIGHTS when it is not negative, and this process's
 *        credentials by SCM_CREDENTIALS when `credentials` is set) if the socket has room now: 0,
 *        or the errno of the failure (EAGAIN: no room). Never raises SIGPIPE.
 */
HOLOSCAN_DLPACK_ABI int send_record_now(int socket, const Frame& frame, int fd,
                                        bool credentials = false) noexcept;

/** @brief Whether `err` from send_record_now() means the peer hung up. */
HOLOSCAN_DLPACK_ABI bool hung_up(int err) noexcept;

}  // namespace holoscan::ipc::detail
