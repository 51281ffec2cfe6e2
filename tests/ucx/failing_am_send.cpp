#include "ucx/failing_am_send.hpp"

#include <atomic>
#include <mutex>
#include <unordered_map>

#include "support/allocation_hooks.hpp"
#include "support/next_definition.hpp"
#include "ucx/armed_failures.hpp"

namespace {

std::atomic<unsigned> g_id{0};
std::atomic<std::size_t> g_tensor_messages{0};
std::atomic<std::size_t> g_bandwidth_tensor_messages{0};
holoscan::test::ArmedFailures g_failures;
holoscan::test::ArmedFailures g_under_way;

holoscan::test::ArmedFailures g_controls;
std::atomic<unsigned> g_control_id{0};

// The requests made up for small messages taken under way, with the status each reports.
struct MadeUpRequests {
  std::mutex mutex;
  std::unordered_map<void*, ucs_status_t> status;
};
MadeUpRequests& made_up() {
  static auto* requests = new MadeUpRequests();  // never destroyed: UCX may free one at exit
  return *requests;
}

// The status of made-up request `request`, or UCS_INPROGRESS when it is UCX's own; `erase`: it
// is freed.
ucs_status_t made_up_status(void* request, bool erase) {
  MadeUpRequests& requests = made_up();
  std::lock_guard<std::mutex> lock(requests.mutex);
  auto found = requests.status.find(request);
  if (found == requests.status.end()) {
    return UCS_INPROGRESS;
  }
  const ucs_status_t status = found->second;
  if (erase) {
    delete static_cast<char*>(found->first);
    requests.status.erase(found);
  }
  return status;
}

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
  static const auto real = holoscan::test::required_next_definition<Send>("ucp_am_send_nbx");
  if (id == static_cast<unsigned>(holoscan::ucx::MessageId::kTensor)) {
    ++g_tensor_messages;
    if ((param->op_attr_mask & UCP_OP_ATTR_FLAG_MULTI_SEND) != 0) {
      ++g_bandwidth_tensor_messages;
    }
  }
  if (fails_now(id)) {
    return UCS_STATUS_PTR(g_failures.status());
  }
  if (g_control_id.load() == id && (param->op_attr_mask & UCP_OP_ATTR_FIELD_CALLBACK) == 0 &&
      g_controls.take()) {
    const holoscan::test::AllocationsNeverFail ucx_side;  // as UCX's own request would not
    auto* request = new char(0);
    MadeUpRequests& requests = made_up();
    std::lock_guard<std::mutex> lock(requests.mutex);
    requests.status.emplace(request, g_controls.status());
    return request;
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

extern "C" ucs_status_t ucp_request_check_status(void* request) {
  using Check = ucs_status_t (*)(void*);
  static const auto real =
      holoscan::test::required_next_definition<Check>("ucp_request_check_status");
  const ucs_status_t status = made_up_status(request, false);
  return status != UCS_INPROGRESS ? status : real(request);
}

extern "C" void ucp_request_free(void* request) {
  using Free = void (*)(void*);
  static const auto real = holoscan::test::required_next_definition<Free>("ucp_request_free");
  if (made_up_status(request, true) == UCS_INPROGRESS) {
    real(request);
  }
}

namespace holoscan::test {

FailingControlsUnderWay::FailingControlsUnderWay(ucx::MessageId id, ucs_status_t status,
                                                 std::size_t count) noexcept {
  g_control_id.store(static_cast<unsigned>(id));
  g_controls.arm(status, count);
}

FailingControlsUnderWay::~FailingControlsUnderWay() { g_controls.disarm(); }

std::size_t FailingControlsUnderWay::failed() const noexcept { return g_controls.failed(); }

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
