#pragma once
// A forked child that runs a check and reports through its exit status, for the tests of what
// the library does in a fork()'s child.
#include <sys/types.h>

#include <chrono>
#include <functional>

namespace holoscan::test {

/** @brief Starts `child` in a forked process, which exits with its result; -1 if fork() failed. */
pid_t start_forked(const std::function<int()>& child);

/**
 * @brief The exit status of a forked child; -1 when it was still running at `deadline` (it is
 *        then killed), 128 + the signal when a signal ended it, -2 when it could not be started.
 */
int wait_forked(pid_t pid, std::chrono::steady_clock::time_point deadline);

/** @brief Runs `child` in a forked process and returns its exit status (see wait_forked). */
int run_forked(const std::function<int()>& child, std::chrono::seconds limit);

}  // namespace holoscan::test
