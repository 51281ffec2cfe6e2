#pragma once
// Watches UCX's rule for sleeping on a worker's event fd: ucp_worker_arm only once
// ucp_worker_progress has found nothing (ucp.h). The test binary's own ucp_worker_progress and
// ucp_worker_arm (watched_arm.cpp) note, per worker, what the last progress call returned, and
// count every arm that followed one that did something. Transports whose arm does not look at
// completions already queued (RDMA) would let a thread sleep past them.
#include <cstddef>

namespace holoscan::test {

/** @brief Arms of a worker whose last progress call did something, in the process's life. */
std::size_t arms_after_progress() noexcept;

/** @brief Arms seen at all, in the process's life. */
std::size_t arms() noexcept;

}  // namespace holoscan::test
