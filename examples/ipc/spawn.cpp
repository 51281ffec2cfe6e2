#include "ipc/spawn.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

extern char** environ;

namespace ipc_demo {

pid_t spawn(const std::string& path, const std::vector<std::string>& arguments,
            const std::vector<int>& inherited, const std::vector<std::string>& environment) {
  // Everything the child needs is built before fork(): after it, a multithreaded parent's child
  // may only make async-signal-safe calls until the exec.
  std::vector<std::string> words{path};
  words.insert(words.end(), arguments.begin(), arguments.end());
  std::vector<char*> argv;
  for (std::string& word : words) {
    argv.push_back(word.data());
  }
  argv.push_back(nullptr);
  std::vector<std::string> settings(environment);  // first: getenv() finds these before the rest
  for (char** entry = environ; *entry != nullptr; ++entry) {
    settings.emplace_back(*entry);
  }
  std::vector<char*> envp;
  for (std::string& setting : settings) {
    envp.push_back(setting.data());
  }
  envp.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    for (int fd : inherited) {
      (void)::fcntl(fd, F_SETFD, 0);  // drop FD_CLOEXEC in the child only
    }
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  return pid;
}

int wait_exit(pid_t pid, int timeout_ms, const std::function<void()>& idle) {
  if (pid <= 0) {
    return -1;  // no child (a failed spawn): waitpid and kill would reach every other process
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  int status = 0;
  for (;;) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) {
      return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
    if (done < 0 || std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      (void)::waitpid(pid, &status, 0);
      return -1;
    }
    if (idle) {
      idle();
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

}  // namespace ipc_demo
