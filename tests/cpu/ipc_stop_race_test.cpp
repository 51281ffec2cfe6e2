// Importer::stop() is a call like the others: an Importer destroyed while another thread is inside
// stop() waits for it before the core it reads goes. The test holds the stopping thread inside its
// shutdown() of the socket (this binary's shutdown() forwards to the C library's, with a pause
// for the thread that asks for one) and destroys the Importer meanwhile.
#include <sys/socket.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <thread>

#include "holoscan/ipc.hpp"
#include "support/fake_cuda_ipc.hpp"
#include "support/ipc_peers.hpp"
#include "support/next_definition.hpp"

namespace {

// Set by the thread whose next shutdown() pauses; told when it is inside and when it is done
// (still inside the counted stop(): what the destructor must wait for).
thread_local bool pause_in_shutdown = false;
std::atomic<bool> inside_shutdown{false};
std::atomic<bool> shutdown_done{false};

}  // namespace

extern "C" int shutdown(int fd, int how) noexcept {
  using Shutdown = int (*)(int, int);
  static const auto real = holoscan::test::required_next_definition<Shutdown>("shutdown");
  if (!pause_in_shutdown) {
    return real(fd, how);
  }
  pause_in_shutdown = false;
  inside_shutdown.store(true);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const int result = real(fd, how);
  shutdown_done.store(true);
  return result;
}

namespace holoscan::ipc {
namespace {

using Clock = std::chrono::steady_clock;

TEST(IpcStopRace, AnImporterDestroyedDuringAnotherThreadsStopWaitsForIt) {
  test::FakeCudaIpcScope scope;
  test::LocalLink link = test::local_link(2);
  ASSERT_TRUE(link.ok());
  inside_shutdown.store(false);
  shutdown_done.store(false);
  std::thread stopping([&] {
    pause_in_shutdown = true;
    link.importer->stop();
  });
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (!inside_shutdown.load() && Clock::now() < deadline) {
    std::this_thread::yield();
  }
  const bool reached = inside_shutdown.load();
  link.importer.reset();  // the destructor: must wait for the stop() under way
  const bool stop_done_first = shutdown_done.load();
  stopping.join();
  ASSERT_TRUE(reached) << "stop() never shut the socket down";
  EXPECT_TRUE(stop_done_first) << "the Importer went while another thread was inside stop()";
  link.exporter.reset();
  link.pool.reset();
}

}  // namespace
}  // namespace holoscan::ipc
