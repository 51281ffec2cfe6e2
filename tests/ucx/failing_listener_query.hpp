#pragma once
// The UCX test binary also replaces ucp_listener_query (failing_listener_query.cpp: it calls UCX's
// own through dlsym(RTLD_NEXT)) so that a test can make listen() fail after UCX made its listener,
// which nothing else can make happen on demand.
#include <cstddef>
#include <cstdint>

#include <ucp/api/ucp.h>

namespace holoscan::test {

/** @brief While alive, the next `count` listener queries in this process fail with `status` (the
 *         listener itself stays as UCX made it). */
class FailingListenerQueries {
 public:
  /** @brief Arms the failures. */
  explicit FailingListenerQueries(ucs_status_t status, std::size_t count = 1) noexcept;
  /** @brief Disarms them. */
  ~FailingListenerQueries();
  FailingListenerQueries(const FailingListenerQueries&) = delete;
  FailingListenerQueries& operator=(const FailingListenerQueries&) = delete;
  /** @brief How many queries failed so far. */
  std::size_t failed() const noexcept;
  /** @brief The port the listener of the last failed query was bound to (0: none, or unknown). */
  std::uint16_t port() const noexcept;
};

}  // namespace holoscan::test
