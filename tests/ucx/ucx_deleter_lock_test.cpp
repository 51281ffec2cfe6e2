// A producer's deleter never runs under a library lock: a UCX send keeps a claim on the tensor
// until UCX is done with its memory, and when the caller dropped its own handle after send(), the
// drop of that claim is the last owner's. It happens in a progress round, under the worker's mutex;
// the claim is let go of only once the mutex is released, so that a deleter that calls back into
// the worker (a pipeline that sends the next buffer once one is free, or asks for stats()) does not
// deadlock on it.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <future>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "holoscan/dlpack.hpp"
#include "support/callback_tensor.hpp"
#include "ucx/ucx_test_support.hpp"

namespace holoscan::test {
namespace {

using Clock = std::chrono::steady_clock;

TEST(UcxDeleterLock, ADeleterRunByTheWorkerMayCallTheWorker) {
  LinkedWorkers sides;
  ASSERT_TRUE(sides.link.client) << to_string(sides.link.client.error());
  const ucx::PeerId peer = *sides.link.client;
  ucx::Worker& client = sides.client;

  std::atomic<int> deleter_calls{0};
  std::atomic<bool> worker_answered_from_deleter{false};
  std::thread::id deleter_thread;
  std::future<void> probe;
  auto on_delete = [&] {
    deleter_thread = std::this_thread::get_id();
    // What a deleter calling back into the worker would do, asked from another thread so that
    // the test reports rather than hangs: does the worker answer while the deleter runs?
    probe = std::async(std::launch::async, [&client] { (void)client.stats(); });
    worker_answered_from_deleter =
        probe.wait_for(std::chrono::milliseconds(1500)) == std::future_status::ready;
    deleter_calls.fetch_add(1);
  };
  {
    // 32 MiB: more than the sockets take at once, so UCX completes the send in a later round.
    auto imported =
        make_tensor_from_dlpack_versioned(make_callback_tensor(on_delete, std::int64_t{32} << 20));
    ASSERT_TRUE(imported);
    auto sent = client.send(peer, *imported);
    ASSERT_TRUE(sent) << to_string(sent.error());
  }  // the caller's handle is gone: the worker's claim is the last owner
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  while (deleter_calls.load() == 0 && Clock::now() < deadline) {
    (void)client.progress();
    auto got = sides.receiver.receive(0);
    ASSERT_TRUE(got) << to_string(got.error());
  }
  ASSERT_EQ(deleter_calls.load(), 1) << "the send never completed";
  if (probe.valid()) {
    probe.wait();
  }
  EXPECT_NE(deleter_thread, std::thread::id());
  EXPECT_TRUE(worker_answered_from_deleter.load())
      << "the producer's deleter ran while the worker's mutex was held (a deleter calling the "
         "worker deadlocks): it ran on the thread in progress(), under the lock";
}

// The destructor's drops run deleters too, once its lock is released and the UCX worker is gone:
// a deleter that calls the worker then is refused (kClosed, or the empty answer), never handed
// to UCX with a worker that no longer exists.
TEST(UcxDeleterLock, ADeleterRunByTheDestructorFindsTheWorkerEnding) {
  LinkedWorkers sides;
  ASSERT_TRUE(sides.link.client) << to_string(sides.link.client.error());
  const ucx::PeerId peer = *sides.link.client;
  std::optional<ucx::Worker> client(std::move(sides.client));
  ucx::Worker* worker = &*client;  // the deleter calls it while `client` destroys it

  std::atomic<int> deleter_calls{0};
  std::vector<ErrorCode> codes;
  bool armed = true;
  std::size_t in_flight = 1;
  int fd = 0;
  auto on_delete = [&] {
    auto progressed = worker->progress();
    codes.push_back(progressed ? ErrorCode::kSuccess : progressed.error().code);
    auto received = worker->receive(0);
    codes.push_back(received ? ErrorCode::kSuccess : received.error().code);
    auto connected = worker->connect("127.0.0.1", 9, 100);
    codes.push_back(connected ? ErrorCode::kSuccess : connected.error().code);
    armed = worker->arm();
    in_flight = worker->in_flight();
    fd = worker->fd();
    deleter_calls.fetch_add(1);
  };
  {
    // 32 MiB, more than the sockets take at once: in flight when the worker goes, and read by
    // the receiver (progressed on another thread) while the destructor flushes it.
    auto imported =
        make_tensor_from_dlpack_versioned(make_callback_tensor(on_delete, std::int64_t{32} << 20));
    ASSERT_TRUE(imported);
    auto sent = client->send(peer, *imported);
    ASSERT_TRUE(sent) << to_string(sent.error());
  }
  ASSERT_EQ(deleter_calls.load(), 0) << "the send completed without the receiver";
  std::atomic<bool> stop{false};
  std::thread receiving([&] {
    while (!stop.load()) {
      (void)sides.receiver.receive(1);
    }
  });
  const auto destroying = std::chrono::steady_clock::now();
  client.reset();  // its drops run the deleter, which calls the worker being destroyed
  const auto destroyed_in = std::chrono::steady_clock::now() - destroying;
  stop = true;
  receiving.join();
  if (deleter_calls.load() == 0) {
    // UCX still read the memory when the destructor's flush ended (a loaded host): it is kept
    // until exit, its deleter never run, and this test has nothing to check. Only a flush that
    // ran out its two seconds says so; a destructor that kept the claim sooner is a failure.
    ASSERT_GE(destroyed_in, std::chrono::milliseconds(1900))
        << "the destructor ran no deleter and did not wait out its flush";
    GTEST_SKIP() << "the transfer did not end within the destructor's flush on this host";
  }
  ASSERT_EQ(deleter_calls.load(), 1);
  EXPECT_EQ(codes,
            (std::vector<ErrorCode>{ErrorCode::kClosed, ErrorCode::kClosed, ErrorCode::kClosed}));
  EXPECT_FALSE(armed);
  EXPECT_EQ(in_flight, 0u);
  EXPECT_EQ(fd, -1) << "the descriptor closes with the UCX worker";
}

}  // namespace
}  // namespace holoscan::test
