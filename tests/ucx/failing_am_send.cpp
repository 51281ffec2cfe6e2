#include "ucx/failing_am_send.hpp"

#include <dlfcn.h>

#include <atomic>

#include "support/allocation_hooks.hpp"
#include "ucx/armed_failures.hpp"

namespace {

std::atomic<unsigned> g_id{0};
std::atomic<std::size_t> g_tensor_messages{0};
std::atomic<std::size_t> g_bandwidth_tensor_messages{0};
holoscan::test::ArmedFailures g_failures;
holoscan::test::ArmedFailures g_under_way;

// The caller's callback and its argument, called with the armed status instead of UCX's.
struct Forwarded {
  ucp_send_nbx_callback_t callback;
  void* user_data;
  ucs_status_t status;
};

void forward(void* request, ucs_status_t, void* user_data) {
  auto* forwarded = static_cast<Forwarded*>(user_data);
  const Forwarded copy = *forwarded;
  delete forwarded;
  copy.callback(request, copy.status, copy.user_data);
}

// Takes one of the armed failures for a message of `id`; whether there was one.
bool fails_now(unsigned id) noexcept { return g_id.load() == id && g_failures.take(); }

}  // namespace

extern "C" ucs_status_ptr_t ucp_am_send_nbx(ucp_ep_h ep, unsigned id, const void* header,
                                            size_t header_length, const void* buffer, size_t count,
                                            const ucp_request_param_t* param) {
  using Send = ucs_status_ptr_t (*)(ucp_ep_h, unsigned, const void*, size_t, const void*, size_t,
                                    const ucp_request_param_t*);
  static const auto real = reinterpret_cast<Send>(dlsym(RTLD_NEXT, "ucp_am_send_nbx"));
  if (id == static_cast<unsigned>(holoscan::ucx::MessageId::kTensor)) {
    ++g_tensor_messages;
    if ((param->op_attr_mask & UCP_OP_ATTR_FLAG_MULTI_SEND) != 0) {
      ++g_bandwidth_tensor_messages;
    }
  }
  if (fails_now(id)) {
    return UCS_STATUS_PTR(g_failures.status());
  }
  if (id == static_cast<unsigned>(holoscan::ucx::MessageId::kTensor) &&
      (param->op_attr_mask & UCP_OP_ATTR_FIELD_CALLBACK) != 0 && g_under_way.take()) {
    // UCX never throws: this stand-in's own allocation must not fail under a test's failing heap.
    const holoscan::test::AllocationsNeverFail ucx_side;
    auto* forwarded = new Forwarded{
        param->cb.send,
        (param->op_attr_mask & UCP_OP_ATTR_FIELD_USER_DATA) != 0 ? param->user_data : nullptr,
        g_under_way.status()};
    ucp_request_param_t changed = *param;
    changed.op_attr_mask |= UCP_OP_ATTR_FIELD_USER_DATA;
    changed.cb.send = forward;
    changed.user_data = forwarded;
    ucs_status_ptr_t request = real(ep, id, header, header_length, buffer, count, &changed);
    if (!UCS_PTR_IS_PTR(request)) {
      delete forwarded;  // done at once: nothing was under way to fail
    }
    return request;
  }
  return real(ep, id, header, header_length, buffer, count, param);
}

namespace holoscan::test {

FailingAmSends::FailingAmSends(ucx::MessageId id, ucs_status_t status, std::size_t count) noexcept {
  g_id.store(static_cast<unsigned>(id));
  g_failures.arm(status, count);
}

FailingAmSends::~FailingAmSends() { g_failures.disarm(); }

std::size_t FailingAmSends::failed() const noexcept { return g_failures.failed(); }

FailingSendsUnderWay::FailingSendsUnderWay(ucs_status_t status, std::size_t count) noexcept {
  g_under_way.arm(status, count);
}

FailingSendsUnderWay::~FailingSendsUnderWay() { g_under_way.disarm(); }

std::size_t FailingSendsUnderWay::failed() const noexcept { return g_under_way.failed(); }

PostedTensorMessages posted_tensor_messages() noexcept {
  return {g_tensor_messages.load(), g_bandwidth_tensor_messages.load()};
}

}  // namespace holoscan::test
