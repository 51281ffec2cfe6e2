#pragma once
// Where a process of the cross-process benchmark spends its host time: the CPU time it used (user
// and system, from getrusage) less the time it spun waiting for a free block or a free socket.
// What is left is the host work per tensor; a process whose work per tensor equals the run's time
// per tensor is what limits the run, and when none comes near it, the limit is elsewhere (the
// GPU, which the processes share).
#include <chrono>
#include <cstdio>

namespace ipc_demo {

/** @brief Adds `spun` to the time this process spent spinning on a retry. */
void note_spin(std::chrono::steady_clock::duration spun) noexcept;

/** @brief CPU time and spin time of this process from its start() to its report(). */
class BusyMeter {
 public:
  /** @brief Starts measuring now. */
  void start() noexcept;
  /** @brief Prints `BUSY role=... tensors=... cpu_us=... spin_us=... work_us_per_tensor=...`. */
  void report(std::FILE* out, const char* role, long tensors) const noexcept;

 private:
  double cpu_us_ = 0;
  double spin_us_ = 0;
  bool started_ = false;
};

}  // namespace ipc_demo
