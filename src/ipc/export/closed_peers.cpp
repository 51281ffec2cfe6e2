#include "ipc/export/closed_peers.hpp"

#include <iterator>
#include <limits>
#include <utility>

namespace holoscan::ipc::detail {

bool ClosedPeers::contains(std::uint64_t id) const noexcept {
  auto after = last_of_.upper_bound(id);  // the first range that starts past `id`
  if (after == last_of_.begin()) {
    return false;
  }
  return std::prev(after)->second >= id;
}

void ClosedPeers::insert(std::uint64_t id) {
  if (contains(id)) {
    return;
  }
  auto after = last_of_.upper_bound(id);
  const bool joins_before = after != last_of_.begin() && std::prev(after)->second + 1 == id;
  const bool joins_after = after != last_of_.end() && id != std::numeric_limits<std::uint64_t>::max() &&
                           after->first == id + 1;
  if (joins_before && joins_after) {
    std::prev(after)->second = after->second;
    last_of_.erase(after);
  } else if (joins_before) {
    std::prev(after)->second = id;
  } else if (joins_after) {
    // The range's own node is re-keyed: nothing is allocated, so no failure can lose the range.
    auto node = last_of_.extract(after);
    node.key() = id;
    last_of_.insert(std::move(node));
  } else {
    last_of_.emplace(id, id);
  }
}

}  // namespace holoscan::ipc::detail
