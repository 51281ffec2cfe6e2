#pragma once
// When the consumers of a run finished: each writes the moment (steady clock, which is the same
// clock in every process of the machine) into a pipe the producer made, so that the producer
// stops its clock at the last consumer's last check instead of at the children's exit, whose CUDA
// teardown takes tens of milliseconds and is no part of the stream being measured.
#include <chrono>
#include <optional>

namespace ipc_demo {

/** @brief The producer's end of the consumers' finish stamps. */
class FinishStamps {
 public:
  FinishStamps() = default;
  FinishStamps(const FinishStamps&) = delete;
  FinishStamps& operator=(const FinishStamps&) = delete;
  /** @brief Closes both ends. */
  ~FinishStamps();

  /** @brief Makes the pipe; false if it cannot be made. */
  bool open();
  /** @brief The end that consumers inherit and write to (-1 before open()). */
  int write_fd() const { return write_fd_; }
  /**
   * @brief The latest of the stamps written, once every writer has exited; none unless exactly
   *        `writers` stamps arrived (a consumer failed before it finished).
   */
  std::optional<std::chrono::steady_clock::time_point> latest(int writers);

  /** @brief In a consumer: writes now to `fd` (nothing when `fd` is -1). */
  static void write(int fd);

 private:
  int read_fd_ = -1;
  int write_fd_ = -1;
};

}  // namespace ipc_demo
