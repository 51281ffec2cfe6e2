#pragma once
// Owners of the UCP context and worker, created with what the protocol needs: active messages
// and a wakeup fd, a worker that serializes its callers (the Worker's mutex does).
#include <cstddef>
#include <memory>

#include <ucp/api/ucp.h>

#include "holoscan/expected.hpp"

namespace holoscan::ucx::detail {

/** @brief Calls ucp_cleanup. */
struct ContextCleanup {
  void operator()(ucp_context_h context) const noexcept { ucp_cleanup(context); }
};
/** @brief An owned ucp_context_h. */
using UniqueContext = std::unique_ptr<ucp_context, ContextCleanup>;

/** @brief Calls ucp_worker_destroy. */
struct WorkerDestroy {
  void operator()(ucp_worker_h worker) const noexcept { ucp_worker_destroy(worker); }
};
/** @brief An owned ucp_worker_h. */
using UniqueWorker = std::unique_ptr<ucp_worker, WorkerDestroy>;

/** @brief A context for active messages and wakeup, configured from the UCX_* environment. */
expected<UniqueContext, Error> create_context();

/** @brief A worker of `context` for serialized callers, with the largest AM header it allows. */
struct CreatedWorker {
  UniqueWorker worker;           ///< The worker.
  int efd = -1;                  ///< Its event fd (owned by the worker).
  std::size_t max_am_header = 0;  ///< ucp_worker_query's max_am_header.
};

/** @brief Creates the worker and asks for its event fd and AM header limit. */
expected<CreatedWorker, Error> create_worker(ucp_context_h context);

/** @brief Registers `callback(arg, ...)` for active message `id` with `flags`. */
expected<void, Error> set_am_handler(ucp_worker_h worker, unsigned id, unsigned flags,
                                     ucp_am_recv_callback_t callback, void* arg);

}  // namespace holoscan::ucx::detail
