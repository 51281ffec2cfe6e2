#pragma once
// Who is at the other end of a channel. The socket's own record (SO_PEERCRED, SO_PEERPIDFD) names
// the process that created or connected it, which need not be the one that uses it: a launcher
// may make the pair and hand the ends to two processes it starts. So each side proves who it is
// in its Hello: it attaches its own pidfd (SCM_RIGHTS) and its credentials (SCM_CREDENTIALS, whose
// pid the kernel checks against the sending process), and the receiver accepts the pidfd only if
// it names the live process with that pid. A pidfd that names pid N while the sender had pid N
// when it sent is the sender's own: the pidfd was taken before the send, and no other process can
// have held pid N alive at that moment (a pidfd of an earlier, reaped holder of N names no live
// process, and /proc reports it so).
#include <cstdint>

#include "holoscan/expected.hpp"
#include "holoscan/ipc/fd.hpp"

namespace holoscan::ipc::detail {

/** @brief A pidfd of this process, for its Hello (pidfd_open, Linux 5.3+). */
expected<UniqueFd, Error> own_pidfd();

/** @brief Makes `socket` receive the credentials of every sender (SO_PASSCRED). */
expected<void, Error> receive_credentials(int socket);

/**
 * @brief The pid, in this process's pid namespace, of the process `pidfd` names: 0 when `pidfd`
 *        is no pidfd or cannot be read, -1 once that process has been reaped. Reads
 *        /proc/self/fdinfo; never throws.
 */
std::int32_t pidfd_pid(int pidfd) noexcept;

/**
 * @brief Accepts `pidfd` as the sender's own when it names the live process `sender_pid` (the
 *        kernel's SCM_CREDENTIALS pid, in this process's pid namespace; 0 when none came).
 *        kPermissionDenied otherwise, naming what it names. Reads /proc/self/fdinfo.
 */
expected<void, Error> check_sender(const UniqueFd& pidfd, std::int32_t sender_pid);

}  // namespace holoscan::ipc::detail
