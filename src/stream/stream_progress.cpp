#include "stream/stream_progress.hpp"

#include <algorithm>

#include "stream/pooled_events.hpp"
#include "stream/stream_point.hpp"

namespace holoscan::detail {
namespace {

constexpr std::size_t kNone = static_cast<std::size_t>(-1);

bool groupable(const StreamPoint& point) noexcept {
  return point.stream_id != 0 && point.recorder != 0;
}

bool completed_on_release_thread(const StreamPoint& point) noexcept {
  use_device_on_release_thread(point.device);
  return point_completed(point);
}

}  // namespace

std::size_t StreamProgress::find(const StreamPoint& point) const noexcept {
  for (std::size_t i = 0; i < known_.size(); ++i) {
    const Known& known = known_[i];
    if (known.stream_id == point.stream_id && known.recorder == point.recorder &&
        known.device == point.device) {
      return i;
    }
  }
  return kNone;
}

std::size_t StreamProgress::find_or_add(const StreamPoint& point) noexcept {
  if (const std::size_t found = find(point); found != kNone) {
    return found;
  }
  if (known_.size() >= kStreams) {
    return kNone;
  }
  try {
    known_.push_back(Known{point.stream_id, point.device, point.recorder, 0, round_});
  } catch (...) {
    return kNone;  // out of memory: its points are asked about one by one
  }
  return known_.size() - 1;
}

// The points not known to have completed, with the stream they belong to.
void StreamProgress::collect(const std::vector<StreamPointList*>& lists) noexcept {
  candidates_.clear();
  for (StreamPointList* list : lists) {
    for (std::size_t i = 0; i < list->size(); ++i) {
      const StreamPoint& point = (*list)[i];
      const std::size_t known = groupable(point) ? find_or_add(point) : kNone;
      if (known == kNone) {
        continue;
      }
      known_[known].seen_round = round_;
      if (point.order <= known_[known].passed) {
        continue;
      }
      try {
        candidates_.push_back(Candidate{known, point});
      } catch (...) {
        return;  // the rest is asked about in a later round
      }
    }
  }
  std::sort(candidates_.begin(), candidates_.end(), [](const Candidate& a, const Candidate& b) {
    return a.known != b.known ? a.known < b.known : a.point.order < b.point.order;
  });
}

// The newest completed point of candidates [first, end) (one stream, oldest first).
void StreamProgress::search(std::size_t first, std::size_t end) noexcept {
  std::size_t done = first;   // candidates before it have completed: none yet
  std::size_t pending = end;  // candidates from it on have not: none known yet
  if (completed_on_release_thread(candidates_[end - 1].point)) {
    done = end;
  } else {
    pending = end - 1;
  }
  while (done < pending) {
    const std::size_t middle = done + (pending - done) / 2;
    if (completed_on_release_thread(candidates_[middle].point)) {
      done = middle + 1;
    } else {
      pending = middle;
    }
  }
  if (done > first) {
    Known& known = known_[candidates_[first].known];
    known.passed = std::max(known.passed, candidates_[done - 1].point.order);
  }
}

// Drops the points known to have completed, and asks about those of no known stream.
void StreamProgress::sweep(const std::vector<StreamPointList*>& lists) noexcept {
  for (StreamPointList* list : lists) {
    for (std::size_t i = list->size(); i-- > 0;) {
      const StreamPoint& point = (*list)[i];
      const std::size_t known = groupable(point) ? find(point) : kNone;
      const bool done =
          known != kNone ? point.order <= known_[known].passed : completed_on_release_thread(point);
      if (done) {
        release_event(point.device, point.event);
        list->swap_remove(i);
      }
    }
  }
}

void StreamProgress::forget_unseen() noexcept {
  for (std::size_t i = known_.size(); i-- > 0;) {
    if (round_ - known_[i].seen_round > kForgetAfterRounds) {
      known_[i] = known_.back();
      known_.pop_back();
    }
  }
}

void StreamProgress::settle(const std::vector<StreamPointList*>& lists) noexcept {
  if (api_ != &cuda()) {
    forget();  // ids of another table's streams (a test swapped it)
    api_ = &cuda();
  }
  ++round_;
  collect(lists);
  for (std::size_t first = 0; first < candidates_.size();) {
    std::size_t end = first + 1;
    while (end < candidates_.size() && candidates_[end].known == candidates_[first].known) {
      ++end;
    }
    search(first, end);
    first = end;
  }
  sweep(lists);
  forget_unseen();
}

void StreamProgress::forget() noexcept {
  known_.clear();
  candidates_.clear();
}

}  // namespace holoscan::detail
