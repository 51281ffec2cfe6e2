#pragma once
// The UCX test binary also replaces ucp_ep_query (reported_transports.cpp: UCX's own through
// dlsym(RTLD_NEXT)) so that a test can have an endpoint report transports this machine does not
// give a loopback pair: CUDA IPC or RDMA, whose peer writes into this side's memory itself.
#include <string>
#include <vector>

namespace holoscan::test {

/** @brief While alive, every endpoint's query for its transports in this process reports
 *         `names` (each on device "test"); other queries are UCX's own. */
class ReportedTransports {
 public:
  /** @brief Starts reporting `names`. */
  explicit ReportedTransports(std::vector<std::string> names);
  /** @brief Back to UCX's answers. */
  ~ReportedTransports();
  ReportedTransports(const ReportedTransports&) = delete;
  ReportedTransports& operator=(const ReportedTransports&) = delete;
  /** @brief How many transport queries were answered with `names`. */
  std::size_t answered() const noexcept;
};

}  // namespace holoscan::test
