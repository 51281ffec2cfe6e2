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

// The points not known to have completed, with the stream they belong to, and each stream's
// newest among them. Not sorted: a stream that has caught up (the common case) needs no order.
void StreamProgress::collect(const std::vector<StreamPointList*>& lists) noexcept {
  candidates_.clear();
  asked_.clear();
  for (StreamPointList* list : lists) {
    for (std::size_t i = 0; i < list->size(); ++i) {
      const StreamPoint& point = (*list)[i];
      const std::size_t known = groupable(point) ? find_or_add(point) : kNone;
      if (known == kNone) {
        continue;
      }
      Known& stream = known_[known];
      stream.seen_round = round_;
      if (point.order <= stream.passed) {
        continue;
      }
      const bool first_of_stream = stream.newest_round != round_;
      try {
        if (first_of_stream) {
          asked_.push_back(known);
        }
        candidates_.push_back(Candidate{known, point});
      } catch (...) {
        if (first_of_stream && !asked_.empty() && asked_.back() == known) {
          asked_.pop_back();  // listed without a candidate: left to a later round
        }
        return;  // the rest is asked about in a later round
      }
      const std::size_t index = candidates_.size() - 1;
      if (first_of_stream || point.order > candidates_[stream.newest].point.order) {
        stream.newest = index;
      }
      stream.newest_round = round_;
    }
  }
}

// Asks each stream about its newest candidate: one question for a stream that has caught up.
// True when some stream lags behind it.
bool StreamProgress::ask_newest() noexcept {
  bool any_lagging = false;
  for (const std::size_t index : asked_) {
    Known& stream = known_[index];
    const StreamPoint& newest = candidates_[stream.newest].point;
    stream.lagging = !completed_on_release_thread(newest);
    if (!stream.lagging) {
      stream.passed = std::max(stream.passed, newest.order);
    }
    any_lagging = any_lagging || stream.lagging;
  }
  return any_lagging;
}

// Sorts the candidates of the lagging streams by stream and age, and searches each stream apart.
void StreamProgress::search_lagging() noexcept {
  const auto lagging_end = std::partition(
      candidates_.begin(), candidates_.end(),
      [&](const Candidate& candidate) { return known_[candidate.known].lagging; });
  std::sort(candidates_.begin(), lagging_end, [](const Candidate& a, const Candidate& b) {
    return a.known != b.known ? a.known < b.known : a.point.order < b.point.order;
  });
  const auto lagging = static_cast<std::size_t>(lagging_end - candidates_.begin());
  for (std::size_t first = 0; first < lagging;) {
    std::size_t end = first + 1;
    while (end < lagging && candidates_[end].known == candidates_[first].known) {
      ++end;
    }
    search(first, end);
    first = end;
  }
}

// The newest completed point of candidates [first, end) (one stream, oldest first), whose last
// (its newest) is known not to have completed.
void StreamProgress::search(std::size_t first, std::size_t end) noexcept {
  std::size_t done = first;       // candidates before it have completed: none yet
  std::size_t pending = end - 1;  // candidates from it on have not
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

// Drops the points known to have completed, and asks about those of no known stream. Their
// events go back in batches: one lock of the pool per batch, not per event.
void StreamProgress::sweep(const std::vector<StreamPointList*>& lists) noexcept {
  EventBatch returned;
  for (StreamPointList* list : lists) {
    for (std::size_t i = list->size(); i-- > 0;) {
      const StreamPoint& point = (*list)[i];
      const std::size_t known = groupable(point) ? find(point) : kNone;
      const bool done =
          known != kNone ? point.order <= known_[known].passed : completed_on_release_thread(point);
      if (done) {
        returned.add(point.device, point.event);
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
  if (ask_newest()) {
    search_lagging();
  }
  sweep(lists);
  forget_unseen();
}

void StreamProgress::forget() noexcept {
  known_.clear();
  candidates_.clear();
  asked_.clear();
}

}  // namespace holoscan::detail
