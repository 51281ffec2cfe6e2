#include "ucx/failing_am_send.hpp"

#include <dlfcn.h>

#include <atomic>

namespace {

std::atomic<unsigned> g_id{0};
std::atomic<ucs_status_t> g_status{UCS_OK};
std::atomic<std::size_t> g_to_fail{0};
std::atomic<std::size_t> g_failed{0};

// Takes one of the armed failures for a message of `id`; whether there was one.
bool fails_now(unsigned id) noexcept {
  if (g_id.load() != id) {
    return false;
  }
  std::size_t left = g_to_fail.load();
  while (left > 0 && !g_to_fail.compare_exchange_weak(left, left - 1)) {
  }
  if (left == 0) {
    return false;
  }
  g_failed.fetch_add(1);
  return true;
}

}  // namespace

extern "C" ucs_status_ptr_t ucp_am_send_nbx(ucp_ep_h ep, unsigned id, const void* header,
                                            size_t header_length, const void* buffer, size_t count,
                                            const ucp_request_param_t* param) {
  using Send = ucs_status_ptr_t (*)(ucp_ep_h, unsigned, const void*, size_t, const void*, size_t,
                                    const ucp_request_param_t*);
  static const auto real = reinterpret_cast<Send>(dlsym(RTLD_NEXT, "ucp_am_send_nbx"));
  if (fails_now(id)) {
    return UCS_STATUS_PTR(g_status.load());
  }
  return real(ep, id, header, header_length, buffer, count, param);
}

namespace holoscan::test {

FailingAmSends::FailingAmSends(ucx::MessageId id, ucs_status_t status, std::size_t count) noexcept {
  g_failed.store(0);
  g_status.store(status);
  g_id.store(static_cast<unsigned>(id));
  g_to_fail.store(count);
}

FailingAmSends::~FailingAmSends() { g_to_fail.store(0); }

std::size_t FailingAmSends::failed() const noexcept { return g_failed.load(); }

}  // namespace holoscan::test
