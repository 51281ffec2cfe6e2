#include "remote_writes.hpp"

#include <array>

namespace holoscan::ucx::detail {

bool writes_only_locally(std::string_view transport) noexcept {
  // tcp and the shared-memory FIFOs carry bytes that this process copies out; self is this
  // process; cuda_copy and gdr_copy are this process's own copies. Not on the list: cma, knem
  // and xpmem (another process writes host memory), cuda_ipc (another process's GPU copies into
  // device memory), the RDMA transports (a NIC's writes), and any name UCX adds later.
  constexpr std::array<std::string_view, 6> kLocal{"tcp",   "self",      "sysv",
                                                   "posix", "cuda_copy", "gdr_copy"};
  for (std::string_view local : kLocal) {
    if (transport == local) {
      return true;
    }
  }
  return false;
}

bool peer_may_write_remotely(ucp_ep_h endpoint) noexcept {
  if (endpoint == nullptr) {
    return true;
  }
  // More than UCX's lanes of one endpoint; a full array may have left some out.
  std::array<ucp_transport_entry_t, 64> entries{};
  ucp_ep_attr_t attributes{};
  attributes.field_mask = UCP_EP_ATTR_FIELD_TRANSPORTS;
  attributes.transports.entries = entries.data();
  attributes.transports.num_entries = static_cast<unsigned>(entries.size());
  attributes.transports.entry_size = sizeof(ucp_transport_entry_t);
  // No answer, a full array, or no transport named at all (nothing says the lanes are local):
  // the peer may write here, and the memory is kept rather than freed under it.
  if (ucp_ep_query(endpoint, &attributes) != UCS_OK || attributes.transports.num_entries == 0 ||
      attributes.transports.num_entries >= entries.size()) {
    return true;
  }
  for (unsigned i = 0; i < attributes.transports.num_entries; ++i) {
    const char* name = entries[i].transport_name;
    if (name == nullptr || !writes_only_locally(name)) {
      return true;
    }
  }
  return false;
}

}  // namespace holoscan::ucx::detail
