#include "ipc/import/ipc_unready_imports.hpp"

#include <cstddef>
#include <utility>

#include "ipc/import/ipc_import_reference.hpp"

namespace holoscan::ipc::detail {

expected<bool, Error> readiness_passed(Tensor& tensor) noexcept {
  // Every tensor held here was made by import_with(), whose memory reference is an
  // ImportedReference, and nobody else has seen it to put another one there.
  const auto reference = tensor.memory_reference();
  if (reference == nullptr) {
    return true;
  }
  return static_cast<ImportedReference&>(*reference).readiness_passed();
}

void UnreadyImports::hold(Tensor& tensor) {
  held_.push_back(std::move(tensor));
  count_.store(held_.size(), std::memory_order_relaxed);
}

std::size_t UnreadyImports::give_back_unready() noexcept {
  std::size_t kept = 0;
  for (std::size_t i = 0; i < held_.size(); ++i) {
    const auto passed = readiness_passed(held_[i]);
    if (passed && *passed) {  // an event that cannot be asked counts as never completing
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

expected<std::optional<Tensor>, Error> UnreadyImports::take_ready() noexcept {
  if (held_.empty()) {
    return std::optional<Tensor>();
  }
  auto passed = readiness_passed(held_.front());
  if (passed && !*passed) {
    return std::optional<Tensor>();
  }
  Tensor front = std::move(held_.front());
  held_.pop_front();
  count_.store(held_.size(), std::memory_order_relaxed);
  if (!passed) {
    front = Tensor();  // given back: its Release goes without event
    return make_unexpected(std::move(passed.error()));  // moved: a copy could throw
  }
  return std::optional<Tensor>(std::move(front));
}

}  // namespace holoscan::ipc::detail
