#include "support/ipc_child.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>

namespace holoscan::test {

void Steps::open() {
  int to_child[2] = {-1, -1};
  int to_parent[2] = {-1, -1};
  ok_ = ::pipe2(to_child, O_CLOEXEC) == 0 && ::pipe2(to_parent, O_CLOEXEC) == 0;
  child_in_ = ipc::UniqueFd(to_child[0]);
  parent_out_ = ipc::UniqueFd(to_child[1]);
  parent_in_ = ipc::UniqueFd(to_parent[0]);
  child_out_ = ipc::UniqueFd(to_parent[1]);
}

void Steps::become_parent() {
  child_in_.reset();
  child_out_.reset();
}

void Steps::become_child() {
  parent_in_.reset();
  parent_out_.reset();
}

void Steps::close() {
  become_parent();
  become_child();
}

bool Steps::send(char step) { return ::write(out(), &step, 1) == 1; }

char Steps::receive(int timeout_ms) {
  pollfd entry{in(), POLLIN, 0};
  char step = 0;
  if (::poll(&entry, 1, timeout_ms) != 1 || ::read(in(), &step, 1) != 1) {
    return 0;
  }
  return step;
}

int Steps::in() const { return parent_in_.valid() ? parent_in_.get() : child_in_.get(); }
int Steps::out() const { return parent_out_.valid() ? parent_out_.get() : child_out_.get(); }

Child::~Child() {
  if (pid_ > 0) {
    (void)kill();
    (void)reap();
  }
  steps_.close();
}

bool Child::kill() { return pid_ > 0 && ::kill(pid_, SIGKILL) == 0; }

int Child::reap() {
  int status = 0;
  const pid_t reaped = pid_ > 0 ? ::waitpid(pid_, &status, 0) : -1;
  pid_ = -1;
  return reaped > 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace holoscan::test
