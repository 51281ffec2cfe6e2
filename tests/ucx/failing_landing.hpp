#pragma once
// The UCX test binary also replaces ucp_am_recv_data_nbx (failing_landing.cpp: it calls UCX's own
// through dlsym(RTLD_NEXT)) so that a test can make a landing complete with an error status while
// the connection stays up, as a transport's local failure (a CUDA copy) would.
#include <cstddef>

#include <ucp/api/ucp.h>

namespace holoscan::test {

/** @brief While alive, the next `count` landings in this process complete with `status` (UCX
 *         still moves the data; only the status its completion reports is replaced). */
class FailingLandings {
 public:
  /** @brief Arms the failures. */
  explicit FailingLandings(ucs_status_t status, std::size_t count = 1) noexcept;
  /** @brief Disarms them. */
  ~FailingLandings();
  FailingLandings(const FailingLandings&) = delete;
  FailingLandings& operator=(const FailingLandings&) = delete;
  /** @brief How many landings were made to fail so far. */
  std::size_t failed() const noexcept;
  /** @brief Of those UCX had under way, how many completed (their callbacks ran), in the
   *         process's life. */
  std::size_t completed() const noexcept;
};

/** @brief Landings this process started so far, and how many asked for bandwidth
 *         (`UCP_OP_ATTR_FLAG_MULTI_SEND`). */
struct StartedLandings {
  std::size_t all = 0;        ///< Every ucp_am_recv_data_nbx.
  std::size_t bandwidth = 0;  ///< Those with the flag.
};

/** @brief The counts so far (take two and subtract). */
StartedLandings started_landings() noexcept;

}  // namespace holoscan::test
