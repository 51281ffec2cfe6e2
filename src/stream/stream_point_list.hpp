#pragma once
/**
 * @file
 * @brief "An event recorded on a stream at a moment" and a small list of them.
 */
#include <cstddef>
#include <cstdint>
#include <new>
#include <utility>
#include <vector>

#include "holoscan/cuda_handles.hpp"
#include "holoscan/export.hpp"

namespace holoscan::detail {

/**
 * @brief A pooled event recorded on `stream` (on `device`) at one moment.
 *
 * Two points with the same stream id and recorder complete in the order of their `order`: they
 * were recorded on one stream, by one thread, one after the other. The release thread asks the
 * GPU about a stream's latest point and knows the earlier ones from it (see ReleaseQueue).
 */
struct HOLOSCAN_DLPACK_ABI StreamPoint {
  cudaStream_t stream = nullptr;  ///< Borrowed; only compared, never used after recording.
  cudaEvent_t event = nullptr;    ///< Pooled event of `device`.
  int device = -1;                ///< Device of `stream` and `event`.
  std::uintptr_t thread_key = 0;  ///< Tells apart per-thread default streams of two threads.
  std::uint64_t stream_id = 0;    ///< cudaStreamGetId of an explicit stream; 0 when unknown.
  std::uint64_t recorder = 0;     ///< The recording thread (never reused); 0 until recorded.
  std::uint64_t order = 0;        ///< Its records so far, this one included.
};

/** @brief Stream points with inline room for the common fan-out, spilling to the heap past it. */
class HOLOSCAN_DLPACK_ABI StreamPointList {
 public:
  /** @brief Points held without a heap allocation: four consumers' deallocation points and the
   *         readiness point, which a release polls beside them. */
  static constexpr std::size_t kInlineCapacity = 5;

  StreamPointList() = default;
  StreamPointList(const StreamPointList&) = delete;
  StreamPointList& operator=(const StreamPointList&) = delete;
  /** @brief Takes the points of `other`, which is left empty. */
  StreamPointList(StreamPointList&& other) noexcept
      : inline_size_(other.inline_size_), overflow_(std::move(other.overflow_)) {
    copy_inline(other);
    other.inline_size_ = 0;
    other.overflow_.clear();
  }
  StreamPointList& operator=(StreamPointList&&) = delete;  // would drop the target's events
  /** @brief Takes the points of `other` into this empty list; `other` is left empty. */
  void adopt(StreamPointList& other) noexcept {
    inline_size_ = other.inline_size_;
    copy_inline(other);
    overflow_.swap(other.overflow_);
    other.inline_size_ = 0;
    other.overflow_.clear();
  }

  /** @brief Number of points. */
  std::size_t size() const noexcept { return inline_size_ + overflow_.size(); }
  /** @brief Whether there are no points. */
  bool empty() const noexcept { return size() == 0; }
  /** @brief The i-th point. */
  StreamPoint& operator[](std::size_t i) noexcept {
    return i < inline_size_ ? inline_.points[i] : overflow_[i - inline_size_];
  }
  /** @brief The i-th point. */
  const StreamPoint& operator[](std::size_t i) const noexcept {
    return i < inline_size_ ? inline_.points[i] : overflow_[i - inline_size_];
  }
  /** @brief Appends a point; false only when spilling past the inline room cannot allocate. */
  bool push_back(const StreamPoint& point) noexcept {
    return emplace_back([&point] { return point; });
  }
  /**
   * @brief Appends the point `make()` returns, built in its place (a point built apart and then
   *        copied is read back before its stores are done: see StreamLocation::point); false only
   *        when spilling past the inline room cannot allocate.
   */
  template <class Make>
  bool emplace_back(Make&& make) noexcept {
    if (inline_size_ < kInlineCapacity && overflow_.empty()) {
      new (&inline_.points[inline_size_]) StreamPoint(make());
      ++inline_size_;
      return true;
    }
    try {
      overflow_.push_back(make());
    } catch (...) {
      return false;
    }
    return true;
  }
  /** @brief Removes the i-th point by moving the last one into its place. */
  void swap_remove(std::size_t i) noexcept {
    std::size_t last = size() - 1;
    (*this)[i] = (*this)[last];
    if (overflow_.empty()) {
      --inline_size_;
    } else {
      overflow_.pop_back();
    }
  }
  /** @brief Forgets every point (their events must have been returned already). */
  void clear() noexcept {
    inline_size_ = 0;
    overflow_.clear();
  }

 private:
  // The first inline_size_ points of `other`; the rest of the room is never read.
  void copy_inline(const StreamPointList& other) noexcept {
    for (std::size_t i = 0; i < inline_size_; ++i) {
      inline_.points[i] = other.inline_.points[i];
    }
  }

  // Room for the inline points, left unwritten until a point is pushed: an owner that never
  // records a point (host memory) pays nothing for it.
  union InlineRoom {
    InlineRoom() noexcept {}
    StreamPoint points[kInlineCapacity];
  };
  InlineRoom inline_;
  std::size_t inline_size_ = 0;
  std::vector<StreamPoint> overflow_;
};

}  // namespace holoscan::detail
