#include "ucx/failing_listener_query.hpp"

#include <netinet/in.h>

#include <atomic>

#include "support/next_definition.hpp"
#include "ucx/armed_failures.hpp"

namespace {

holoscan::test::ArmedFailures g_failures;
std::atomic<std::uint16_t> g_port{0};

// The port `address` names (0 for another family).
std::uint16_t port_of(const sockaddr_storage& address) noexcept {
  if (address.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&address)->sin6_port);
  }
  if (address.ss_family == AF_INET) {
    return ntohs(reinterpret_cast<const sockaddr_in*>(&address)->sin_port);
  }
  return 0;
}

}  // namespace

extern "C" ucs_status_t ucp_listener_query(ucp_listener_h listener, ucp_listener_attr_t* attr) {
  using Query = ucs_status_t (*)(ucp_listener_h, ucp_listener_attr_t*);
  static const auto real = holoscan::test::required_next_definition<Query>("ucp_listener_query");
  if (!g_failures.take()) {
    return real(listener, attr);
  }
  // UCX's own answer, kept from the caller: the test learns where the listener it was refused
  // is bound, to check that nobody is still listening there.
  ucp_listener_attr_t own{};
  own.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
  g_port.store(real(listener, &own) == UCS_OK ? port_of(own.sockaddr) : 0);
  return g_failures.status();
}

namespace holoscan::test {

FailingListenerQueries::FailingListenerQueries(ucs_status_t status, std::size_t count) noexcept {
  g_port.store(0);
  g_failures.arm(status, count);
}

FailingListenerQueries::~FailingListenerQueries() { g_failures.disarm(); }

std::size_t FailingListenerQueries::failed() const noexcept { return g_failures.failed(); }

std::uint16_t FailingListenerQueries::port() const noexcept { return g_port.load(); }

}  // namespace holoscan::test
