#include "ucp_objects.hpp"

#include <uct/api/uct.h>

#include <algorithm>
#include <array>
#include <cstdlib>

#include "ucx_error.hpp"

namespace holoscan::ucx::detail {
namespace {

// Components whose remote writes travel only through a connection (tcp, shared memory, CUDA
// IPC) or that copy within this process (self, cuda_cpy, gdr_copy).
bool closes_with_the_connection(const std::string& component) {
  constexpr std::array<const char*, 10> kKnown = {"self", "tcp",      "sysv",     "posix",
                                                  "cma",  "knem",     "xpmem",    "cuda_cpy",
                                                  "cuda_ipc", "gdr_copy"};
  return std::any_of(kKnown.begin(), kKnown.end(),
                     [&](const char* known) { return component == known; });
}

expected<void, Error> apply_defaults(ucp_config_t* config) {
  const auto in_environment = [](const std::string& variable) {
    return std::getenv(variable.c_str()) != nullptr;
  };
  for (const auto& [name, value] : context_defaults(in_environment, available_components())) {
    if (ucs_status_t status = ucp_config_modify(config, name.c_str(), value.c_str());
        status != UCS_OK) {
      return make_unexpected(
          ucx_error("ucx worker: UCX_" + name + "=" + value, "ucp_config_modify", status));
    }
  }
  return {};
}

}  // namespace

std::vector<UcxSetting> context_defaults(
    const std::function<bool(const std::string& variable)>& is_set,
    const std::vector<std::string>& components) {
  std::vector<UcxSetting> settings;
  if (!is_set("UCX_RNDV_PIPELINE_ERROR_HANDLING") &&
      std::all_of(components.begin(), components.end(), closes_with_the_connection)) {
    settings.emplace_back("RNDV_PIPELINE_ERROR_HANDLING", "y");
  }
  return settings;
}

std::vector<std::string> available_components() {
  std::vector<std::string> names;
  uct_component_h* components = nullptr;
  unsigned count = 0;
  if (uct_query_components(&components, &count) != UCS_OK) {
    return {"?"};  // unknown: nothing is assumed about the transports
  }
  for (unsigned i = 0; i < count; ++i) {
    uct_component_attr_t attr{};
    attr.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME;
    names.emplace_back(uct_component_query(components[i], &attr) == UCS_OK ? attr.name : "?");
  }
  uct_release_component_list(components);
  return names;
}

expected<UniqueContext, Error> create_context() {
  ucp_config_t* config = nullptr;
  if (ucs_status_t status = ucp_config_read(nullptr, nullptr, &config); status != UCS_OK) {
    return make_unexpected(ucx_error("ucx worker", "ucp_config_read", status));
  }
  if (auto applied = apply_defaults(config); !applied) {
    ucp_config_release(config);
    return forward_error(std::move(applied));
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
