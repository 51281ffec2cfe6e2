#pragma once
// The floor of a cross-process round trip: what the library's round trip must at least cost, done
// by hand between two processes. A Unix SOCK_SEQPACKET ping-pong of the library's own frames (a
// Publish with its memory's fd attached, a Release), plus per side one cudaEventRecord of an
// interprocess event and one cudaStreamWaitEvent on the other side's, opened once. No mapping,
// no validation, no claims, no pool: those are the library's work.
#include "ipc/roles.hpp"

namespace ipc_demo {

/** @brief How the floor's processes wait for the next frame. */
struct FloorOptions {
  bool spin = false;    ///< Poll the socket without sleeping (else block in recv).
  bool send_fd = true;  ///< Attach a descriptor to each Publish, as the library does.
  bool kernels = true;  ///< A kernel on each side, as the round trip's fill and check.
  /// The pipeline floor's waits on the other side's events: asked from the host until complete
  /// (as the library's kOnHost importers and its exporters do) instead of cudaStreamWaitEvent.
  bool host_wait = false;
};

/**
 * @brief The producer's side: starts the peer (`self` with role=floor), runs `shape.count`
 *        round trips (the first kWarmUp untimed) and prints a RESULT line (us_per_tensor) as the
 *        round trip mode does. Exit status 0 on success.
 */
int run_floor(const std::string& self, const RunShape& shape, const FloorOptions& options);

/** @brief The peer's side (role=floor): answers each Publish on `fd` with a Release. */
int floor_peer(int fd, const RunShape& shape, const FloorOptions& options);

}  // namespace ipc_demo
