#pragma once
// Owners of the UCP context and worker, created with what the protocol needs: active messages
// and a wakeup fd, a worker that serializes its callers (the Worker's mutex does).
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

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

/** @brief A UCX setting (its name without the UCX_ prefix) and the value a worker gives it. */
using UcxSetting = std::pair<std::string, std::string>;

/**
 * @brief What a worker's context sets where the environment says nothing (`is_set("UCX_<name>")`
 *        tells whether it does), given the names of the UCX components this process has.
 *
 * RNDV_PIPELINE_ERROR_HANDLING=y, when every component moves data only through connections
 * that UCX closes before it fails a peer's requests (tcp, shared memory, CUDA copies and IPC):
 * the endpoints handle peer failure, and without it UCX leaves device memory no rendezvous but
 * fragmented copy-in copy-out (docs/ucx.md, "Protocols"). Not with an RDMA component, whose
 * peer may still write into UCX's staging buffers after the abort (UCX has no invalidation for
 * the pipeline).
 */
std::vector<UcxSetting> context_defaults(
    const std::function<bool(const std::string& variable)>& is_set,
    const std::vector<std::string>& components);

/** @brief The names of the UCX components (uct_query_components) this process can use. */
std::vector<std::string> available_components();

/**
 * @brief A context for active messages and wakeup, configured from the UCX_* environment and,
 *        where that says nothing, from context_defaults().
 */
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
