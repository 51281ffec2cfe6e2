#include "ipc/import/ipc_admissions.hpp"

#include <algorithm>

namespace holoscan::ipc::detail {

bool Admissions::finished_or_passed(std::uint64_t id) const noexcept {
  const auto end = ahead_.begin() + static_cast<std::ptrdiff_t>(ahead_count_);
  return id <= carried_ || id <= floor_ || std::find(ahead_.begin(), end, id) != end;
}

Admissions::Verdict Admissions::verdict(std::uint64_t id) const noexcept {
  if (id == 0) {
    return Verdict::kNoExport;
  }
  if (std::find(held_.begin(), held_.end(), id) != held_.end()) {
    return Verdict::kHeld;
  }
  if (id <= carried_) {
    return Verdict::kSeen;
  }
  if (finished_or_passed(id)) {
    return Verdict::kFinishedAhead;
  }
  return Verdict::kNew;
}

void Admissions::hold(std::uint64_t id) { held_.push_back(id); }

void Admissions::carried(std::uint64_t id) noexcept {
  if (id <= carried_) {
    return;
  }
  carried_ = id;
  // What the channel has passed is seen by its order now: no need to remember it.
  for (std::size_t i = 0; i < ahead_count_;) {
    if (ahead_[i] <= carried_) {
      ahead_[i] = ahead_[--ahead_count_];
    } else {
      ++i;
    }
  }
}

void Admissions::finish(std::uint64_t id) noexcept {
  if (auto held = std::find(held_.begin(), held_.end(), id); held != held_.end()) {
    *held = held_.back();
    held_.pop_back();
  }
  if (finished_or_passed(id)) {
    return;
  }
  if (ahead_count_ < ahead_.size()) {
    ahead_[ahead_count_++] = id;
    return;
  }
  // Full: the lowest of them (or `id`) folds into the floor, seen with every id below it.
  auto lowest = std::min_element(ahead_.begin(), ahead_.end());
  if (id < *lowest) {
    floor_ = id;
    return;
  }
  floor_ = *lowest;
  *lowest = id;
}

}  // namespace holoscan::ipc::detail
