#include "gpu/ipc_spawn.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "ipc/spawn.hpp"

namespace holoscan::test {

const char* peer_binary() { return HOLOSCAN_DLPACK_IPC_PEER; }

SpawnedPeer spawn_peer(const std::vector<std::string>& arguments,
                       const std::vector<std::string>& environment) {
  SpawnedPeer peer;
  auto ends = ipc::Channel::pair();
  int signal_pipe[2] = {-1, -1};
  if (!ends || ::pipe2(signal_pipe, O_CLOEXEC) != 0) {
    ADD_FAILURE() << "cannot make the peer's channel or pipe";
    return peer;
  }
  ipc::UniqueFd signal_read(signal_pipe[0]);
  ipc::UniqueFd signal_write(signal_pipe[1]);
  const int child_fd = ends->second.fd();
  std::vector<std::string> words{"channel_fd=" + std::to_string(child_fd),
                                 "signal_fd=" + std::to_string(signal_write.get())};
  words.insert(words.end(), arguments.begin(), arguments.end());
  peer.pid = ipc_demo::spawn(peer_binary(), words, {child_fd, signal_write.get()}, environment);
  if (peer.pid < 0) {
    ADD_FAILURE() << "fork failed";
    return peer;
  }
  peer.signal_fd = signal_read.release();
  peer.channel.emplace(std::move(ends->first));
  return peer;  // the child's ends close here, in the parent
}

int wait_peer(pid_t pid, int timeout_ms) { return ipc_demo::wait_exit(pid, timeout_ms); }

}  // namespace holoscan::test
