#pragma once
// Where a cross-process round trip spends its time: each process stamps every tensor at the end of
// each of its stages (steady_clock, the same clock in every process), writes the stamps to a file
// at the end, and the producer prints the median of each stage from both files (trace=PREFIX).
#include <array>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace ipc_demo {

/** @brief Stage stamps of one process, per tensor. */
class StageTrace {
 public:
  /** @brief Stages a process stamps at most. */
  static constexpr std::size_t kStages = 6;

  /** @brief Stamps kept for `count` tensors, written to `path` (empty: nothing is kept). */
  StageTrace(std::string path, long count);
  /** @brief Stamps the end of `stage` for tensor `tensor`. */
  void mark(long tensor, std::size_t stage);
  /** @brief Writes the stamps ("tensor ns ns ..." per line); false if the file cannot be. */
  bool write() const;

  /** @brief Reads the stamps `write` wrote to `path`. */
  static std::vector<std::array<std::int64_t, kStages>> read(const std::string& path);

 private:
  std::string path_;
  std::vector<std::array<std::int64_t, kStages>> stamps_;
};

/**
 * @brief Prints the median and 90th percentile of each segment of a round trip, in microseconds,
 *        from the producer's and the consumer's stamps of tensors `first` on (after the warm-up).
 */
void print_round_trip_stages(std::FILE* out, const std::string& prefix, long first);

/**
 * @brief Prints the same for each stage of a producer -> relay -> sink pipeline, from the three
 *        processes' stamps of tensors `first` on: where each process spends its time per tensor.
 */
void print_pipeline_stages(std::FILE* out, const std::string& prefix, long first);

}  // namespace ipc_demo
