#include "support/forked_child.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

namespace holoscan::test {

pid_t start_forked(const std::function<int()>& child) {
  const pid_t pid = fork();
  if (pid == 0) {
    _exit(child());  // no exit handlers: they belong to the parent's test run
  }
  return pid;
}

int wait_forked(pid_t pid, std::chrono::steady_clock::time_point deadline) {
  if (pid < 0) {
    return -2;
  }
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) != pid) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int run_forked(const std::function<int()>& child, std::chrono::seconds limit) {
  return wait_forked(start_forked(child), std::chrono::steady_clock::now() + limit);
}

}  // namespace holoscan::test
