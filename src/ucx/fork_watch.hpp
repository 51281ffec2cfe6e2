#pragma once
// UCX does not survive fork(): a child shares its parent's UCX sockets and epoll sets, so a child
// that tears its copy of a worker down takes the parent's connections apart (UCX then aborts the
// parent), and UCX made by the child itself never connects while the parent had a worker alive at
// the fork (likely: UCX's asynchronous progress thread is not in the child). This tells a worker's copy in a child from
// the worker, and a child whose UCX is unusable from a process whose UCX is whole.
#include <cstdint>

namespace holoscan::ucx::detail {

/** @brief How many fork()s led to this process (0 in the one that loaded the library). */
std::uint64_t forks_so_far() noexcept;

/** @brief Whether a fork() that led here happened while a worker was alive in the parent. */
bool forked_while_a_worker_was_alive() noexcept;

/** @brief Counts one worker alive for the fork handler, for as long as it lives. */
class LiveWorker {
 public:
  LiveWorker() noexcept;
  ~LiveWorker();
  LiveWorker(const LiveWorker&) = delete;
  LiveWorker& operator=(const LiveWorker&) = delete;
};

}  // namespace holoscan::ucx::detail
