#pragma once
// Forked children for the cross-process tests: one-byte steps over a pipe each way, and a child
// process that runs a function and exits with its result. A child that is still running when its
// owner goes is killed and reaped, so that a failed test leaves no process behind.
#include <sys/types.h>
#include <unistd.h>

#include "holoscan/ipc/fd.hpp"

namespace holoscan::test {

/** @brief A pipe each way between a test and its child: one byte per step. */
class Steps {
 public:
  /** @brief Opens both pipes (close-on-exec); ok() says whether that worked. */
  void open();
  /** @brief Whether both pipes are open. */
  bool ok() const { return ok_; }
  /** @brief Keeps the parent's ends only. */
  void become_parent();
  /** @brief Keeps the child's ends only. */
  void become_child();
  /** @brief Closes every end. */
  void close();
  /** @brief Sends one byte to the other side; false when it could not. */
  bool send(char step);
  /** @brief The next byte from the other side within `timeout_ms`, or 0. */
  char receive(int timeout_ms = 10000);

 private:
  int in() const;
  int out() const;
  bool ok_ = false;
  ipc::UniqueFd child_in_, parent_out_, parent_in_, child_out_;
};

/** @brief A forked child running a function; killed (SIGKILL) and reaped if its owner goes first.
 */
class Child {
 public:
  Child() = default;
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  /** @brief Kills and reaps the child if it still runs. */
  ~Child();

  /**
   * @brief Forks; the child keeps its ends of steps(), runs `body()` and _exits with what it
   *        returns (it never returns into the test framework). False when fork() failed.
   */
  template <class Body>
  bool start(Body body) {
    steps_.open();
    if (!steps_.ok()) {
      return false;
    }
    pid_ = ::fork();
    if (pid_ == 0) {
      steps_.become_child();
      ::_exit(body());
    }
    steps_.become_parent();
    return pid_ > 0;
  }

  /** @brief The steps to and from the child. */
  Steps& steps() { return steps_; }
  /** @brief The child's pid (-1 before start and after reap). */
  pid_t pid() const { return pid_; }
  /** @brief Sends SIGKILL; false when there is no child. */
  bool kill();
  /** @brief Waits for the child: its exit status, or -1 when a signal ended it. */
  int reap();

 private:
  Steps steps_;
  pid_t pid_ = -1;
};

}  // namespace holoscan::test
