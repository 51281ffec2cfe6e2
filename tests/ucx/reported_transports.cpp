#include "ucx/reported_transports.hpp"
#include "support/next_definition.hpp"

#include <atomic>
#include <utility>

#include <ucp/api/ucp.h>

namespace {

// Set while a ReportedTransports lives (tests make one at a time, before the workers' rounds).
std::atomic<const std::vector<std::string>*> g_names{nullptr};
std::atomic<std::size_t> g_answered{0};

}  // namespace

extern "C" ucs_status_t ucp_ep_query(ucp_ep_h ep, ucp_ep_attr_t* attr) {
  using Query = ucs_status_t (*)(ucp_ep_h, ucp_ep_attr_t*);
  static const auto real = holoscan::test::required_next_definition<Query>("ucp_ep_query");
  const auto* names = g_names.load();
  if (names == nullptr || attr->field_mask != UCP_EP_ATTR_FIELD_TRANSPORTS) {
    return real(ep, attr);
  }
  unsigned count = 0;
  for (const std::string& name : *names) {
    if (count == attr->transports.num_entries) {
      break;
    }
    attr->transports.entries[count].transport_name = name.c_str();
    attr->transports.entries[count].device_name = "test";
    ++count;
  }
  attr->transports.num_entries = count;
  ++g_answered;
  return UCS_OK;
}

namespace holoscan::test {

ReportedTransports::ReportedTransports(std::vector<std::string> names) {
  g_answered.store(0);
  g_names.store(new std::vector<std::string>(std::move(names)));
}

ReportedTransports::~ReportedTransports() { delete g_names.exchange(nullptr); }

std::size_t ReportedTransports::answered() const noexcept { return g_answered.load(); }

}  // namespace holoscan::test
