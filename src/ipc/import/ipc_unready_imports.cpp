#include "ipc/import/ipc_unready_imports.hpp"

#include <cstddef>
#include <utility>

#include "ipc/import/ipc_import_reference.hpp"

namespace holoscan::ipc::detail {

bool readiness_passed(Tensor& tensor) noexcept {
  // Every tensor held here was made by import_with(), whose memory reference is an
  // ImportedReference, and nobody else has seen it to put another one there.
  const auto reference = tensor.memory_reference();
  return reference == nullptr || static_cast<ImportedReference&>(*reference).readiness_passed();
}

void UnreadyImports::hold(Tensor& tensor) {
  held_.push_back(std::move(tensor));
  count_.store(held_.size(), std::memory_order_relaxed);
}

std::size_t UnreadyImports::give_back_unready() noexcept {
  std::size_t kept = 0;
  for (std::size_t i = 0; i < held_.size(); ++i) {
    if (readiness_passed(held_[i])) {
      if (i != kept) {
        held_[kept] = std::move(held_[i]);  // onto one given back (its Release goes now)
      }
      ++kept;
    }
  }
  held_.erase(held_.begin() + static_cast<std::ptrdiff_t>(kept), held_.end());
  count_.store(kept, std::memory_order_relaxed);
  return kept;
}

std::optional<Tensor> UnreadyImports::take_ready() noexcept {
  if (held_.empty() || !readiness_passed(held_.front())) {
    return std::nullopt;
  }
  std::optional<Tensor> ready(std::move(held_.front()));
  held_.pop_front();
  count_.store(held_.size(), std::memory_order_relaxed);
  return ready;
}

}  // namespace holoscan::ipc::detail
