#include "ucp_objects.hpp"

#include "ucx_error.hpp"

namespace holoscan::ucx::detail {

expected<UniqueContext, Error> create_context() {
  ucp_config_t* config = nullptr;
  if (ucs_status_t status = ucp_config_read(nullptr, nullptr, &config); status != UCS_OK) {
    return make_unexpected(ucx_error("ucx worker", "ucp_config_read", status));
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  params.features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
  params.mt_workers_shared = 0;
  ucp_context_h context = nullptr;
  const ucs_status_t status = ucp_init(&params, config, &context);
  ucp_config_release(config);
  if (status != UCS_OK) {
    return make_unexpected(ucx_error("ucx worker", "ucp_init", status));
  }
  return UniqueContext(context);
}

expected<CreatedWorker, Error> create_worker(ucp_context_h context) {
  ucp_worker_params_t params{};
  params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  params.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  ucp_worker_h raw = nullptr;
  if (ucs_status_t status = ucp_worker_create(context, &params, &raw); status != UCS_OK) {
    return make_unexpected(ucx_error("ucx worker", "ucp_worker_create", status));
  }
  CreatedWorker created{UniqueWorker(raw)};
  if (ucs_status_t status = ucp_worker_get_efd(raw, &created.efd); status != UCS_OK) {
    return make_unexpected(ucx_error("ucx worker", "ucp_worker_get_efd", status));
  }
  ucp_worker_attr_t attr{};
  attr.field_mask = UCP_WORKER_ATTR_FIELD_MAX_AM_HEADER;
  if (ucs_status_t status = ucp_worker_query(raw, &attr); status != UCS_OK) {
    return make_unexpected(ucx_error("ucx worker", "ucp_worker_query", status));
  }
  created.max_am_header = attr.max_am_header;
  return created;
}

expected<void, Error> set_am_handler(ucp_worker_h worker, unsigned id, unsigned flags,
                                     ucp_am_recv_callback_t callback, void* arg) {
  ucp_am_handler_param_t params{};
  params.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_FLAGS |
                      UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
  params.id = id;
  params.flags = flags;
  params.cb = callback;
  params.arg = arg;
  if (ucs_status_t status = ucp_worker_set_am_recv_handler(worker, &params); status != UCS_OK) {
    return make_unexpected(ucx_error("ucx worker", "ucp_worker_set_am_recv_handler", status));
  }
  return {};
}

}  // namespace holoscan::ucx::detail
