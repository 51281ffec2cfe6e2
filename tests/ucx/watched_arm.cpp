#include "ucx/watched_arm.hpp"

#include <ucp/api/ucp.h>

#include <atomic>
#include <mutex>
#include <unordered_map>

#include "support/allocation_hooks.hpp"
#include "support/next_definition.hpp"

namespace {

std::mutex g_mutex;
// Per worker: whether its last progress call did something. Leaked: UCX may be called from static
// destructors.
auto* g_last_progress = new std::unordered_map<ucp_worker_h, bool>();
std::atomic<std::size_t> g_arms{0};
std::atomic<std::size_t> g_arms_after_progress{0};

}  // namespace

extern "C" unsigned ucp_worker_progress(ucp_worker_h worker) {
  using Progress = unsigned (*)(ucp_worker_h);
  static const auto real =
      holoscan::test::required_next_definition<Progress>("ucp_worker_progress");
  const unsigned progressed = real(worker);
  const holoscan::test::AllocationsNeverFail ucx_side;  // the map's node, under a failing heap
  std::lock_guard<std::mutex> lock(g_mutex);
  (*g_last_progress)[worker] = progressed != 0;
  return progressed;
}

extern "C" ucs_status_t ucp_worker_arm(ucp_worker_h worker) {
  using Arm = ucs_status_t (*)(ucp_worker_h);
  static const auto real = holoscan::test::required_next_definition<Arm>("ucp_worker_arm");
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    const auto found = g_last_progress->find(worker);
    if (found != g_last_progress->end() && found->second) {
      ++g_arms_after_progress;
    }
  }
  ++g_arms;
  return real(worker);
}

namespace holoscan::test {

std::size_t arms_after_progress() noexcept { return g_arms_after_progress.load(); }

std::size_t arms() noexcept { return g_arms.load(); }

}  // namespace holoscan::test
