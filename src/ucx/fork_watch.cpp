#include "fork_watch.hpp"

#include <pthread.h>

#include <atomic>
#include <cstddef>

namespace holoscan::ucx::detail {
namespace {

// Constant-initialized: no first-use guard that a fork() could copy half-taken.
std::atomic<std::uint64_t> forks{0};
std::atomic<std::size_t> workers_alive{0};
std::atomic<bool> forked_with_a_worker{false};

// Runs in the child only, with one thread: what the parent had alive at the fork is in the counts.
void note_fork_in_child() noexcept {
  if (workers_alive.load(std::memory_order_relaxed) != 0) {
    forked_with_a_worker.store(true, std::memory_order_relaxed);
  }
  forks.fetch_add(1, std::memory_order_relaxed);
}

// Registered when the library is loaded, before any worker exists.
[[maybe_unused]] const bool fork_handler_registered =
    pthread_atfork(nullptr, nullptr, note_fork_in_child) == 0;

}  // namespace

std::uint64_t forks_so_far() noexcept { return forks.load(std::memory_order_relaxed); }

bool forked_while_a_worker_was_alive() noexcept {
  return forked_with_a_worker.load(std::memory_order_relaxed);
}

LiveWorker::LiveWorker() noexcept { workers_alive.fetch_add(1, std::memory_order_relaxed); }

LiveWorker::~LiveWorker() { workers_alive.fetch_sub(1, std::memory_order_relaxed); }

}  // namespace holoscan::ucx::detail
