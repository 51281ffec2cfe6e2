#include "ucx/failing_landing.hpp"

#include <atomic>

#include "support/allocation_hooks.hpp"
#include "support/next_definition.hpp"
#include "ucx/armed_failures.hpp"

namespace {

holoscan::test::ArmedFailures g_failures;
std::atomic<std::size_t> g_landings{0};
std::atomic<std::size_t> g_bandwidth_landings{0};
std::atomic<std::size_t> g_failed_completions{0};

// The caller's callback and its argument, called with the armed status instead of UCX's.
struct Forwarded {
  ucp_am_recv_data_nbx_callback_t callback;
  void* user_data;
  ucs_status_t status;
};

void forward(void* request, ucs_status_t, std::size_t length, void* user_data) {
  auto* forwarded = static_cast<Forwarded*>(user_data);
  const Forwarded copy = *forwarded;
  delete forwarded;
  copy.callback(request, copy.status, length, copy.user_data);
  ++g_failed_completions;
}

}  // namespace

extern "C" ucs_status_ptr_t ucp_am_recv_data_nbx(ucp_worker_h worker, void* data_desc, void* buffer,
                                                 size_t count, const ucp_request_param_t* param) {
  using Receive =
      ucs_status_ptr_t (*)(ucp_worker_h, void*, void*, size_t, const ucp_request_param_t*);
  static const auto real =
      holoscan::test::required_next_definition<Receive>("ucp_am_recv_data_nbx");
  ++g_landings;
  if ((param->op_attr_mask & UCP_OP_ATTR_FLAG_MULTI_SEND) != 0) {
    ++g_bandwidth_landings;
  }
  if (!g_failures.take() || (param->op_attr_mask & UCP_OP_ATTR_FIELD_CALLBACK) == 0) {
    return real(worker, data_desc, buffer, count, param);
  }
  const ucs_status_t status = g_failures.status();
  // UCX never throws: this stand-in's own allocation must not fail under a test's failing heap.
  const holoscan::test::AllocationsNeverFail ucx_side;
  auto* forwarded = new Forwarded{
      param->cb.recv_am,
      (param->op_attr_mask & UCP_OP_ATTR_FIELD_USER_DATA) != 0 ? param->user_data : nullptr,
      status};
  ucp_request_param_t changed = *param;
  changed.op_attr_mask |= UCP_OP_ATTR_FIELD_USER_DATA;
  changed.cb.recv_am = forward;
  changed.user_data = forwarded;
  ucs_status_ptr_t request = real(worker, data_desc, buffer, count, &changed);
  if (UCS_PTR_IS_PTR(request)) {
    return request;  // completes through forward()
  }
  delete forwarded;
  return UCS_PTR_IS_ERR(request) ? request : UCS_STATUS_PTR(status);
}

namespace holoscan::test {

FailingLandings::FailingLandings(ucs_status_t status, std::size_t count) noexcept {
  g_failures.arm(status, count);
}

FailingLandings::~FailingLandings() { g_failures.disarm(); }

std::size_t FailingLandings::failed() const noexcept { return g_failures.failed(); }

std::size_t FailingLandings::completed() const noexcept { return g_failed_completions.load(); }

StartedLandings started_landings() noexcept {
  return {g_landings.load(), g_bandwidth_landings.load()};
}

}  // namespace holoscan::test
