#pragma once
// What the release thread knows of how far each stream has got, so that it asks the GPU about a
// stream once per round instead of once per point: points recorded on one stream by one thread
// complete in the order they were recorded (StreamPoint::order), so the newest that has completed
// vouches for every older one. Keyed by stream id, never by handle: CUDA gives a handle to a new
// stream once the old one is destroyed, but never an id.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "cuda/cuda_api.hpp"
#include "holoscan/export.hpp"
#include "stream/stream_point_list.hpp"

namespace holoscan::detail {

/** @brief The release thread's record of each stream's progress; not thread-safe (its own). */
class HOLOSCAN_DLPACK_ABI StreamProgress {
 public:
  /** @brief Streams remembered at most; points of others are asked about one by one. */
  static constexpr std::size_t kStreams = 256;
  /** @brief Rounds after which a stream not seen is forgotten. */
  static constexpr std::uint64_t kForgetAfterRounds = 1024;

  /**
   * @brief Drops from every list the points that have completed, returning their events.
   *
   * Per stream and recording thread: the points known to have completed go without a question;
   * of the rest, the newest is asked about first (one question when the stream has caught up),
   * then a binary search finds the newest that has. Points without a stream id are asked about
   * one by one. Never blocks. Makes each point's device current first (QueryThread::kRelease).
   */
  void settle(const std::vector<StreamPointList*>& lists) noexcept;

  /** @brief Forgets every stream (a forked child; a CUDA table swapped in tests). */
  void forget() noexcept;

  /** @brief Streams remembered now. */
  std::size_t streams() const noexcept { return known_.size(); }

 private:
  struct Known {
    std::uint64_t stream_id = 0;
    int device = -1;
    std::uint64_t recorder = 0;
    std::uint64_t passed = 0;      // every point with an order up to this one has completed
    std::uint64_t seen_round = 0;  // the last round that had a point of it
    std::uint64_t newest_round = 0;  // the last round that had a candidate of it
    std::size_t newest = 0;          // that round's newest candidate (an index)
    bool lagging = false;            // that candidate had not completed
  };
  struct Candidate {
    std::size_t known = 0;
    StreamPoint point;
  };

  std::size_t find(const StreamPoint& point) const noexcept;
  std::size_t find_or_add(const StreamPoint& point) noexcept;
  void collect(const std::vector<StreamPointList*>& lists) noexcept;
  bool ask_newest() noexcept;
  void search_lagging() noexcept;
  void search(std::size_t first, std::size_t end) noexcept;
  void sweep(const std::vector<StreamPointList*>& lists) noexcept;
  void forget_unseen() noexcept;

  std::vector<Known> known_;
  std::vector<Candidate> candidates_;
  std::vector<std::size_t> asked_;  // streams with candidates this round (known_ indices)
  std::uint64_t round_ = 0;
  const CudaApi* api_ = nullptr;
};

}  // namespace holoscan::detail
