// Covers fork() while the importer's release path holds its locks: ReleaseRings::record() takes the
// interprocess event pool's lock while it holds the release ring's (while the ring grows), and
// calls the CUDA table (here a fake whose own lock its fork handler holds across fork()) under
// both. A fork() that races a pure importer's first releases must not leave the forking thread
// and the releasing thread waiting on each other for good. (The ring and the pool once held their
// locks across fork() too, in an order that had to agree with that nesting; now no prepare handler
// of theirs waits for anything but a set-up section: a forked child forgets the pool, and its copy
// of a connection's rings records nothing.)
//
// The registration order is per process, so the scenario runs in a fresh process: the test binary
// again (exec), running only the disabled child test below.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>

#include "ipc/cuda/cuda_ipc_api.hpp"
#include "ipc/cuda/ipc_event_pool.hpp"
#include "ipc/import/ipc_release_stream.hpp"
#include "stream/stream_point_list.hpp"
#include "support/fake_cuda_ipc.hpp"

namespace holoscan::ipc {
namespace {

std::atomic<bool> g_inside{false};   // the release is creating its ring's event
std::atomic<bool> g_proceed{false};  // let it go on
const detail::CudaIpcApi* g_fake = nullptr;

cudaError_t held_event_create(cudaEvent_t* event, unsigned int flags) {
  g_inside.store(true);
  while (!g_proceed.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return g_fake->event_create_with_flags(event, flags);
}

bool wait_for(const std::atomic<bool>& flag, int ms) {
  for (int i = 0; i < ms && !flag.load(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return flag.load();
}

// Runs in a fresh process (see IpcForkLockOrder below); exits 0 when neither thread is stuck.
TEST(IpcForkLockOrderChild, DISABLED_ForkDuringTheFirstReleases) {
  test::FakeCudaIpcScope scope;
  g_fake = &test::FakeCudaIpc::table();
  static detail::CudaIpcApi hooked = test::FakeCudaIpc::table();
  hooked.event_create_with_flags = &held_event_create;
  const detail::CudaIpcApi* previous = detail::install_cuda_ipc_api(&hooked);

  // A connection's first release: its ring's lock, then the event pool's.
  std::optional<holoscan::detail::ReleaseRings> rings{std::in_place, -1};
  std::atomic<bool> released{false};
  std::thread releaser([&] {
    holoscan::detail::StreamPointList none;
    auto event = rings->record(0, none);
    EXPECT_TRUE(event.has_value());
    released.store(true);
  });
  ASSERT_TRUE(wait_for(g_inside, 5000));
  // Another thread forks now (a subprocess launched, a worker pool started).
  std::atomic<bool> forked{false};
  std::thread forker([&] {
    const pid_t child = ::fork();
    if (child == 0) {
      ::_exit(0);
    }
    int status = 0;
    (void)::waitpid(child, &status, 0);
    forked.store(true);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  g_proceed.store(true);
  const bool done = wait_for(released, 5000) && wait_for(forked, 5000);
  if (!done) {
    std::fprintf(stderr, "deadlock: release %s, fork %s\n", released ? "done" : "stuck",
                 forked ? "done" : "stuck");
    std::fflush(stderr);
    ::_exit(3);  // both threads are stuck for good: nothing can be joined
  }
  releaser.join();
  forker.join();
  rings.reset();
  holoscan::detail::reset_release_streams();
  (void)holoscan::detail::destroy_free_ipc_events();
  detail::install_cuda_ipc_api(previous);
}

TEST(IpcForkLockOrder, AForkDuringAnImportersFirstReleasesDoesNotDeadlock) {
  char self[4096] = {};
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  ASSERT_GT(n, 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::execl(self, self, "--gtest_filter=IpcForkLockOrderChild.DISABLED_ForkDuringTheFirstReleases",
            "--gtest_also_run_disabled_tests", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  pid_t reaped = 0;
  while ((reaped = ::waitpid(child, &status, WNOHANG)) == 0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (reaped == 0) {
    ::kill(child, SIGKILL);
    (void)::waitpid(child, &status, 0);
    FAIL() << "the child never finished";
  }
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "exit 3: the forking thread and the releasing thread wait on each other for good";
}

}  // namespace
}  // namespace holoscan::ipc
