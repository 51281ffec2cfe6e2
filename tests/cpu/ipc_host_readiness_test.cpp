// Covers ReadinessWait::kOnHost, on the fake runtimes: receive() holds an import back until its
// readiness event has completed (asked, never waited on), returns imports in the exporter's order
// with their readiness contract met (a consumer's stream never waits on another process), gives
// back what it held when the Importer goes, and, when the exporter's process exits with an
// import's event never completed, gives that import back and reports kClosed. Every test checks
// that no claim stays and no descriptor leaks.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "holoscan/deferred_release.hpp"
#include "holoscan/ipc.hpp"
#include "holoscan/tensor_pool.hpp"
#include "support/allocation_hooks.hpp"
#include "support/fake_cuda_ipc.hpp"
#include "support/gtest_printers.hpp"
#include "support/ipc_child.hpp"
#include "support/ipc_peers.hpp"
#include "support/ipc_raw_socket.hpp"
#include "support/thread_asleep.hpp"

namespace holoscan::ipc {
namespace {

using test::CudaEntry;
using test::CudaIpcEntry;

ImporterOptions on_host() { return test::readiness_options(ReadinessWait::kOnHost); }

class IpcHostReadiness : public ::testing::Test {
 protected:
  void SetUp() override {
    fds_before_ = test::open_fd_count();
    test::LocalLink link = test::local_link(4);  // the default: ReadinessWait::kOnHost
    ASSERT_TRUE(link.ok());
    pool_ = std::move(link.pool);
    exporter_ = std::move(link.exporter);
    peer_ = link.peer;
    importer_ = std::move(link.importer);
  }

  void TearDown() override {
    importer_.reset();
    if (exporter_) {
      EXPECT_TRUE(test::poll_until(*exporter_, [&] { return exporter_->held() == 0; }))
          << exporter_->held() << " claim(s) never dropped";
      exporter_.reset();
    }
    pool_.reset();
    scope_.reset();
    EXPECT_EQ(test::open_fd_count(), fds_before_) << "descriptor leak";
  }

  // Publishes a pool tensor of 8 floats, all `value`, ready on `producer` (busy until completed).
  void publish(cudaStream_t producer, float value) {
    Tensor tensor = test::allocate(*pool_, {8});
    auto* data = static_cast<float*>(tensor.data());
    for (int i = 0; i < 8; ++i) {
      data[i] = value;
    }
    fake().launch(producer);
    ASSERT_TRUE(tensor.set_readiness_stream(producer));
    auto id = exporter_->publish(peer_, tensor);
    ASSERT_TRUE(id.has_value()) << id.error().message;
  }

  std::optional<Tensor> receive(int timeout_ms) {
    auto received = importer_->receive(timeout_ms);
    EXPECT_TRUE(received.has_value()) << received.error().message;
    return received ? std::move(*received) : std::nullopt;
  }

  test::FakeCuda& fake() { return scope_->fake(); }
  test::FakeCudaIpc& ipc() { return scope_->ipc(); }

  int fds_before_ = 0;
  std::optional<test::FakeCudaIpcScope> scope_{std::in_place};
  std::shared_ptr<TensorPool> pool_;
  std::optional<Exporter> exporter_;
  std::optional<Importer> importer_;
  PeerId peer_ = 0;
};

TEST_F(IpcHostReadiness, AnImportIsHeldUntilItsEventCompletesThenComesWithItsContractMet) {
  const cudaStream_t producer = fake().create_stream(0);
  publish(producer, 1.5f);

  EXPECT_FALSE(receive(0).has_value()) << "its producer is still busy";
  const auto started = std::chrono::steady_clock::now();
  EXPECT_FALSE(receive(20).has_value()) << "held for the whole timeout";
  EXPECT_GE(std::chrono::steady_clock::now() - started, std::chrono::milliseconds(20));
  EXPECT_EQ(importer_->stats().held_for_readiness, 1u);
  EXPECT_EQ(importer_->awaiting_readiness(), 1u) << "what an event loop asks";
  EXPECT_EQ(importer_->outstanding(), 1u) << "imported, not given back";

  fake().complete(producer);
  std::optional<Tensor> imported = receive(1000);
  ASSERT_TRUE(imported.has_value());
  EXPECT_EQ(importer_->awaiting_readiness(), 0u);
  EXPECT_TRUE(imported->has_readiness_stream_contract()) << "met, so consumer code is the same";
  EXPECT_EQ(static_cast<const float*>(imported->data())[7], 1.5f);
  const cudaStream_t consumer = fake().create_stream(0);
  const std::uint64_t waits = ipc().calls(CudaIpcEntry::kStreamWaitEvent);
  auto ordered = imported->synchronize_for_consumer_stream(consumer);
  ASSERT_TRUE(ordered.has_value()) << ordered.error().message;
  EXPECT_EQ(ipc().calls(CudaIpcEntry::kStreamWaitEvent), waits) << "no wait on another process";
  ASSERT_TRUE(imported->synchronize_for_host().has_value());
  EXPECT_EQ(ipc().calls(CudaIpcEntry::kEventSynchronize), 0u) << "asked, never waited on";
  EXPECT_EQ(fake().calls(CudaEntry::kEventSynchronize), 0u);
  EXPECT_EQ(importer_->stats().held_for_readiness, 1u);
}

TEST_F(IpcHostReadiness, AReadyImportComesAtOnceAndImportsComeInTheExportersOrder) {
  const cudaStream_t first = fake().create_stream(0);
  const cudaStream_t second = fake().create_stream(0);
  publish(first, 1.0f);
  publish(second, 2.0f);
  fake().complete(second);
  EXPECT_FALSE(receive(0).has_value()) << "the first is held";
  EXPECT_FALSE(receive(0).has_value()) << "the second is ready, but behind the first";
  EXPECT_EQ(importer_->awaiting_readiness(), 2u);
  fake().complete(first);
  for (const float expected : {1.0f, 2.0f}) {
    std::optional<Tensor> imported = receive(1000);
    ASSERT_TRUE(imported.has_value());
    EXPECT_EQ(static_cast<const float*>(imported->data())[0], expected);
  }
  EXPECT_EQ(importer_->stats().held_for_readiness, 2u);

  // Ready when it arrives: returned by the same call, never held.
  const cudaStream_t third = fake().create_stream(0);
  publish(third, 3.0f);
  fake().complete(third);
  std::optional<Tensor> imported = receive(1000);
  ASSERT_TRUE(imported.has_value());
  EXPECT_EQ(static_cast<const float*>(imported->data())[0], 3.0f);
  EXPECT_EQ(importer_->stats().held_for_readiness, 2u);
}

TEST_F(IpcHostReadiness, TheImportersEndGivesBackWhatItHeld) {
  const cudaStream_t producer = fake().create_stream(0);
  publish(producer, 1.0f);
  EXPECT_FALSE(receive(0).has_value());
  EXPECT_EQ(exporter_->held(), 1u);
  importer_.reset();
  flush_deferred_releases();
  // Nothing of this process touched it: the Release goes without event, and the claim drops
  // although the exporter's own producer is still busy (its pool waits for that itself).
  EXPECT_TRUE(test::poll_until(*exporter_, [&] { return exporter_->held() == 0; }));
  EXPECT_EQ(exporter_->stats().releases, 1u);
  EXPECT_EQ(pool_->available_blocks(), 3u) << "the block waits for its producer";
  fake().complete(producer);
  EXPECT_EQ(pool_->available_blocks(), 4u);
}

// An Importer going away while another thread waits in its receive() (the only way to end a
// receive(-1) short of the exporter hanging up) wakes that thread, which returns kClosed, and
// waits for it to return: it read the freed Importer before (ASan: its held imports' list), and
// one holding an import whose producer never finished polled on, freed, without end.
class ReceiveOnAnotherThread {
 public:
  // Returns once the thread sleeps in the receive() (in poll(), or, holding an unready import,
  // between its polls): a thread not yet in the call would start it on a destroyed Importer.
  explicit ReceiveOnAnotherThread(Importer& importer)
      : result_(std::async(std::launch::async, [this, &importer] {
          thread_ = test::current_thread_id();
          return importer.receive(-1);
        })) {
    while (thread_ == 0) {
      std::this_thread::yield();
    }
    (void)test::wait_until_asleep(thread_);
  }

  // What the receive returned, once it did (5 s at most).
  expected<std::optional<Tensor>, Error> result() {
    if (result_.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
      ADD_FAILURE() << "the receive() did not return";
      std::_Exit(1);  // the thread still reads the Importer: nothing after this is sound
    }
    return result_.get();
  }

 private:
  std::atomic<pid_t> thread_{0};
  std::future<expected<std::optional<Tensor>, Error>> result_;
};

void expect_ended_by_the_importers_end(expected<std::optional<Tensor>, Error> received) {
  ASSERT_FALSE(received.has_value());
  EXPECT_EQ(received.error().code, ErrorCode::kClosed);
  EXPECT_EQ(received.error().message, "ipc importer: the importer is being destroyed");
}

TEST_F(IpcHostReadiness, DestroyingTheImporterEndsAReceiveAsleepOnItsSocket) {
  ReceiveOnAnotherThread waiting(*importer_);  // asleep in poll() by now
  importer_.reset();
  expect_ended_by_the_importers_end(waiting.result());
}

TEST_F(IpcHostReadiness, DestroyingTheImporterEndsAReceiveHoldingAnUnreadyImport) {
  const cudaStream_t producer = fake().create_stream(0);
  publish(producer, 2.0f);
  ReceiveOnAnotherThread waiting(*importer_);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (importer_->awaiting_readiness() == 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(importer_->awaiting_readiness(), 1u) << "the receive holds it and asks again";
  importer_.reset();
  expect_ended_by_the_importers_end(waiting.result());
  flush_deferred_releases();
  EXPECT_TRUE(test::poll_until(*exporter_, [&] { return exporter_->held() == 0; }))
      << "what it held is given back";
  fake().complete(producer);
}

// stop() from another thread ends a receive() under way at once and refuses later calls; the
// socket stops receiving, so the exporter's next publish fails instead of queueing for an
// Importer that will never read it. Python's close() from another thread used to leave such a
// receive() reading for the rest of its 100 ms slice.
TEST_F(IpcHostReadiness, StoppingTheImporterEndsAReceiveAndTheExportersNextPublishFails) {
  ReceiveOnAnotherThread waiting(*importer_);
  importer_->stop();
  const auto received = waiting.result();
  ASSERT_FALSE(received.has_value());
  EXPECT_EQ(received.error().code, ErrorCode::kClosed);
  EXPECT_EQ(received.error().message, "ipc importer: the importer was stopped");
  const auto later = importer_->receive(0);
  ASSERT_FALSE(later.has_value()) << "a stopped Importer received";
  EXPECT_EQ(later.error().message, "ipc importer: the importer was stopped");
  importer_->stop();  // idempotent
  Tensor tensor = test::allocate(*pool_, {8});
  const auto id = exporter_->publish(peer_, tensor);
  ASSERT_FALSE(id.has_value()) << "a publish to a stopped Importer was taken";
  EXPECT_EQ(id.error().code, ErrorCode::kClosed) << id.error().message;
}

// receive() is for one thread at a time: a second beside it read Publishes out of the exporter's
// order, and one refused as such kept its export's claim (a pool block) until the process exited.
// It is refused at once, the first one going on.
TEST_F(IpcHostReadiness, AReceiveBesideAnotherIsRefusedAndTheFirstGoesOn) {
  ReceiveOnAnotherThread waiting(*importer_);  // asleep in poll() by now
  const auto beside = importer_->receive(0);
  ASSERT_FALSE(beside.has_value()) << "a second receive() ran beside the first";
  EXPECT_EQ(beside.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(beside.error().message,
            "ipc importer: receive() is already running on another thread (one at a time: the "
            "Publishes would be read out of the exporter's order)");
  const cudaStream_t producer = fake().create_stream(0);
  publish(producer, 3.0f);
  fake().complete(producer);  // ready: the first receive() returns it
  const auto received = waiting.result();
  ASSERT_TRUE(received.has_value()) << received.error().message;
  ASSERT_TRUE(received->has_value()) << "the first receive() was ended by the second";
  EXPECT_EQ(static_cast<const float*>((*received)->data())[0], 3.0f);
  EXPECT_EQ(importer_->receive(0).value_or(std::nullopt), std::nullopt) << "alone again";
}

TEST_F(IpcHostReadiness, AssigningOverTheImporterEndsAReceiveAsleepOnIt) {
  test::ConnectedImporter second = test::connect_importer(*exporter_);
  ASSERT_TRUE(second.importer.has_value());
  ReceiveOnAnotherThread waiting(*importer_);
  *importer_ = std::move(*second.importer);  // the first connection goes: its receive ends
  expect_ended_by_the_importers_end(waiting.result());
  EXPECT_EQ(importer_->receive(0).value_or(std::nullopt), std::nullopt) << "the second one's";
}

// A child forked while a thread of its parent is in receive(-1) inherits the count of calls under
// way, not the thread: its copy of the Importer going away must not wait for it (it did, for good).
TEST_F(IpcHostReadiness, AForkedChildsCopyGoingAwayDoesNotWaitForTheParentsCall) {
  ReceiveOnAnotherThread waiting(*importer_);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    importer_.reset();  // the child's copy goes away
    std::_Exit(0);
  }
  int status = 0;
  pid_t done = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while ((done = ::waitpid(child, &status, WNOHANG)) == 0 &&
         std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (done == 0) {
    ::kill(child, SIGKILL);
    ::waitpid(child, &status, 0);
  }
  EXPECT_EQ(done, child) << "the child's copy still waited after 5 s";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  importer_.reset();
  expect_ended_by_the_importers_end(waiting.result());
}

// receive(0) reads what is there once: with an import held, each call takes one more Publish,
// so that an exporter that publishes faster than this reads cannot keep the call going.
TEST_F(IpcHostReadiness, AReceiveThatMustNotWaitTakesOnePublishAtATimeWhileHolding) {
  const cudaStream_t producer = fake().create_stream(0);
  for (int i = 0; i < 3; ++i) {
    publish(producer, static_cast<float>(i));
  }
  for (std::size_t held = 1; held <= 3; ++held) {
    EXPECT_FALSE(receive(0).has_value());
    EXPECT_EQ(importer_->awaiting_readiness(), held);
  }
  fake().complete(producer);
  for (int i = 0; i < 3; ++i) {
    std::optional<Tensor> imported = receive(0);
    ASSERT_TRUE(imported.has_value());
    EXPECT_EQ(static_cast<const float*>(imported->data())[0], static_cast<float>(i));
  }
}

// An event that cannot be asked (a broken context) would hold its import, and all behind it, for
// ever: that import is given back and the error says so, naming the call and CUDA's error.
TEST_F(IpcHostReadiness, AnEventThatCannotBeAskedGivesItsImportBackWithTheError) {
  const cudaStream_t producer = fake().create_stream(0);
  publish(producer, 1.0f);
  EXPECT_FALSE(receive(0).has_value());
  ASSERT_EQ(importer_->awaiting_readiness(), 1u);
  ipc().fail_next(CudaIpcEntry::kEventQuery, cudaErrorLaunchFailure);
  auto failed = importer_->receive(0);
  ASSERT_FALSE(failed.has_value());
  EXPECT_EQ(failed.error().code, ErrorCode::kFailure);
  EXPECT_NE(failed.error().message.find("ipc importer: an import held for its readiness was "
                                        "given back: cudaEventQuery(readiness)"),
            std::string::npos)
      << failed.error().message;
  EXPECT_NE(failed.error().message.find("cudaErrorLaunchFailure"), std::string::npos);
  EXPECT_EQ(importer_->awaiting_readiness(), 0u);
  flush_deferred_releases();
  EXPECT_TRUE(test::poll_until(*exporter_, [&] { return exporter_->held() == 0; }))
      << "its Release went";
  fake().complete(producer);
}

// The same refusal with the host out of memory, each of receive(0)'s allocations failed in turn
// (in a forked child, since an exception escaping a noexcept step ends the process): the call
// returns every time. Handing on the query's error once copied it inside a noexcept step.
TEST_F(IpcHostReadiness, AnUnaskableEventsRefusalOutOfMemoryNeverEndsTheProcess) {
#ifdef HDL_THREAD_SANITIZER
  GTEST_SKIP() << "forked children that use the fake runtime cannot run under ThreadSanitizer";
#endif
  const cudaStream_t producer = fake().create_stream(0);
  publish(producer, 1.0f);
  EXPECT_FALSE(receive(0).has_value());
  ASSERT_EQ(importer_->awaiting_readiness(), 1u);
  ipc().fail_next(CudaIpcEntry::kEventQuery, cudaErrorLaunchFailure);
  bool some_failed = false;
  for (std::uint64_t skip = 0; skip < 16; ++skip) {
    test::Child child;
    Importer* importer = &*importer_;
    ASSERT_TRUE(child.start([importer, skip] {
      test::FailingAllocations failing(skip);
      try {
        (void)importer->receive(0);
      } catch (...) {
        return 2;
      }
      return failing.failed() != 0 ? 0 : 1;
    }));
    const int status = child.reap();
    ASSERT_GE(status, 0) << "the child ended by a signal at allocation " << skip;
    ASSERT_NE(status, 2) << "an exception escaped receive at allocation " << skip;
    some_failed = some_failed || status != 1;
  }
  EXPECT_TRUE(some_failed) << "no allocation of the refusal was made to fail";
  ASSERT_FALSE(importer_->receive(0).has_value());  // this process's own refusal
  EXPECT_EQ(importer_->awaiting_readiness(), 0u);
  flush_deferred_releases();
  fake().complete(producer);
}

// receive(0) with the host out of memory, the n-th allocation of the call and the next failed
// (two in a row: a Publish the channel could not parse is named for its Release by decoding it
// again): the call never throws and every export comes back. The second failure once left the
// export unnamed, its claim held until this process's exit.
TEST_F(IpcHostReadiness, AReceiveOutOfMemoryNeverThrowsAndGivesEveryExportBack) {
  for (std::uint64_t skip = 0;; ++skip) {
    const cudaStream_t producer = fake().create_stream(0);
    publish(producer, 1.0f);
    bool threw = false;
    std::uint64_t failed = 0;
    {
      test::FailingAllocations failing(skip, 2);
      try {
        (void)importer_->receive(0);
      } catch (...) {
        threw = true;
      }
      failed = failing.failed();
    }
    ASSERT_FALSE(threw) << "an exception escaped receive from allocation " << skip << " on";
    fake().complete(producer);
    while (receive(100).has_value()) {  // what was held or left unread, dropped at once
    }
    flush_deferred_releases();
    ASSERT_TRUE(test::poll_until(*exporter_, [&] { return exporter_->held() == 0; }))
        << "allocation " << skip << ": an export was never given back";
    if (failed == 0) {
      break;
    }
  }
}

// Behind a stalled import the Importer holds kMaxHeldForReadiness at most, then leaves the socket
// unread (the exporter's later sends wait); once the oldest is ready every import comes, in order.
TEST_F(IpcHostReadiness, WhatIsHeldIsBoundedAndTheRestWaitsInTheSocket) {
  const std::size_t count = kMaxHeldForReadiness + 8;
  pool_ = test::make_device_pool(64, count, test::PoolKind::kShareable);
  ASSERT_NE(pool_, nullptr);
  const cudaStream_t producer = fake().create_stream(0);
  fake().launch(producer);
  std::size_t published = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (published < count && std::chrono::steady_clock::now() < deadline) {
    Tensor tensor = test::allocate(*pool_, {4});
    static_cast<float*>(tensor.data())[0] = static_cast<float>(published);
    ASSERT_TRUE(tensor.set_readiness_stream(producer));
    for (;;) {  // the same tensor again while the socket is full
      auto id = exporter_->publish(peer_, tensor);
      if (id) {
        ++published;
        break;
      }
      ASSERT_EQ(id.error().code, ErrorCode::kNotReady) << id.error().message;
      ASSERT_LT(std::chrono::steady_clock::now(), deadline);
      (void)exporter_->poll();
      EXPECT_FALSE(receive(0).has_value()) << "everything waits for the producer";
    }
  }
  ASSERT_EQ(published, count);
  for (std::size_t i = 0; i < count + 64; ++i) {  // one Publish read per call at most
    EXPECT_FALSE(receive(0).has_value());
  }
  EXPECT_EQ(importer_->awaiting_readiness(), kMaxHeldForReadiness);
  EXPECT_EQ(importer_->outstanding(), kMaxHeldForReadiness) << "the rest stay in the socket";
  fake().complete(producer);
  for (std::size_t i = 0; i < count; ++i) {
    std::optional<Tensor> imported = receive(1000);
    ASSERT_TRUE(imported.has_value()) << i;
    ASSERT_EQ(static_cast<const float*>(imported->data())[0], static_cast<float>(i));
  }
}

TEST_F(IpcHostReadiness, WhatIsHeldMovesWithTheImporter) {
  const cudaStream_t producer = fake().create_stream(0);
  publish(producer, 5.0f);
  EXPECT_FALSE(receive(0).has_value());
  Importer moved(std::move(*importer_));
  EXPECT_EQ(moved.awaiting_readiness(), 1u);
  EXPECT_EQ(importer_->awaiting_readiness(), 0u) << "moved from";
  fake().complete(producer);
  auto imported = moved.receive(1000);
  ASSERT_TRUE(imported.has_value()) << imported.error().message;
  ASSERT_TRUE(imported->has_value());
  EXPECT_EQ(static_cast<const float*>((*imported)->data())[0], 5.0f);
  *importer_ = std::move(moved);  // the fixture's teardown lets it go
}

// Readiness on the host is the default: the fixture's Importer, made without options, holds an
// import whose producer is busy and returns it once its event completed, no consumer stream
// waiting.
TEST_F(IpcHostReadiness, AnImporterWithoutOptionsWaitsOnTheHost) {
  EXPECT_EQ(ImporterOptions{}.readiness, ReadinessWait::kOnHost);
  const cudaStream_t producer = fake().create_stream(0);
  publish(producer, 2.0f);
  EXPECT_FALSE(receive(20).has_value()) << "returned before its producer finished";
  EXPECT_EQ(importer_->awaiting_readiness(), 1u);
  fake().complete(producer);
  std::optional<Tensor> imported = receive(1000);
  ASSERT_TRUE(imported.has_value());
  const cudaStream_t consumer = fake().create_stream(0);
  const std::uint64_t waits = ipc().calls(CudaIpcEntry::kStreamWaitEvent);
  ASSERT_TRUE(imported->synchronize_for_consumer_stream(consumer).has_value());
  EXPECT_EQ(ipc().calls(CudaIpcEntry::kStreamWaitEvent), waits) << "no stream waits";
}

// What an event loop must know (docs/python.md, "Selectors and asyncio"): a held import's event
// completing makes the Importer's descriptor readable neither; awaiting_readiness() says one is
// held, and receive(0) returns it once it is ready.
TEST_F(IpcHostReadiness, AnEventLoopSeesAHeldImportThroughAwaitingReadinessNotItsFd) {
  const cudaStream_t producer = fake().create_stream(0);
  publish(producer, 3.0f);
  const auto readable = [&](int timeout_ms) {
    pollfd entry{importer_->fd(), POLLIN, 0};
    return ::poll(&entry, 1, timeout_ms) == 1;
  };
  ASSERT_TRUE(readable(5000)) << "the Publish wakes the loop";
  EXPECT_FALSE(receive(0).has_value());
  EXPECT_EQ(importer_->awaiting_readiness(), 1u);
  fake().complete(producer);
  EXPECT_FALSE(readable(50)) << "a completing event wakes no descriptor";
  EXPECT_EQ(importer_->awaiting_readiness(), 1u) << "so the loop keeps asking";
  EXPECT_TRUE(receive(0).has_value());
  EXPECT_EQ(importer_->awaiting_readiness(), 0u);
}

TEST(IpcHostReadinessOptions, AReadinessWaitOfNeitherKindIsRefused) {
  auto ends = Channel::pair();
  ASSERT_TRUE(ends.has_value());
  ImporterOptions options;
  options.readiness = static_cast<ReadinessWait>(7);
  auto importer = Importer::create(std::move(ends->second), options);
  ASSERT_FALSE(importer.has_value());
  EXPECT_EQ(importer.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(importer.error().message,
            "ipc importer: readiness must be ReadinessWait::kOnGpu or kOnHost, not 7");
}

// An exporter in a forked child (the fake runtime's state is the child's copy; interprocess
// events are shared with it), and this process's Importer, readiness on the host.
class IpcHostReadinessExporterProcess : public ::testing::Test {
 protected:
  void SetUp() override {
#ifdef HDL_THREAD_SANITIZER
    // The fake runtime remakes its mutex in a forked child (fake_cuda.cpp, renew_after_fork), and
    // ThreadSanitizer takes the first lock of the remade mutex for a double lock and stops the
    // child, which uses the fake's streams here; the other presets run these tests.
    GTEST_SKIP() << "forked children that use the fake runtime cannot run under ThreadSanitizer";
#endif
    pool_ = test::make_device_pool(1024, 4, test::PoolKind::kShareable);
    ASSERT_NE(pool_, nullptr);
  }

  // Forks the exporter: `body(exporter, peer)` publishes and says whether it did; once it
  // returns the child's Exporter goes (its channel hangs up), `after(steps)` runs (and says
  // whether it went well), and the child lives on until told to exit (one step). This process
  // keeps no copy of the exporter's end.
  template <class Body, class After>
  void fork_exporter(Body body, After after) {
    auto ends = Channel::pair();
    ASSERT_TRUE(ends.has_value());
    ASSERT_TRUE(child_.start([&] {
      { Channel theirs = std::move(ends->second); }
      bool ok = false;
      {
        auto exporter = Exporter::create();
        auto peer = exporter ? exporter->add_peer(std::move(ends->first), 10000)
                             : expected<PeerId, Error>(make_unexpected(exporter.error()));
        ok = peer.has_value() && body(*exporter, *peer);
      }
      ok = after(child_.steps()) && ok;
      return child_.steps().receive() != 0 && ok ? 0 : 1;  // until told to exit
    }));
    { Channel theirs = std::move(ends->first); }
    auto importer = Importer::create(std::move(ends->second), on_host());
    ASSERT_TRUE(importer.has_value()) << importer.error().message;
    importer_.emplace(std::move(*importer));
  }

  // Asks the Importer until it has held `count` imports for their readiness (5 s at most),
  // returning none.
  void held(std::uint64_t count) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (importer_->stats().held_for_readiness < count &&
           std::chrono::steady_clock::now() < deadline) {
      auto received = importer_->receive(1);
      ASSERT_TRUE(received.has_value()) << received.error().message;
      EXPECT_FALSE(received->has_value()) << "behind an import whose producer is still busy";
    }
    ASSERT_EQ(importer_->stats().held_for_readiness, count);
  }

  test::FakeCuda& fake() { return scope_.fake(); }

  test::FakeCudaIpcScope scope_;
  std::shared_ptr<TensorPool> pool_;
  test::Child child_;
  std::optional<Importer> importer_;
};

// The exporter's process publishes three tensors and exits, the second's producer never done (a
// process killed mid-work: its events never complete). The first, ready before, still comes, and
// the third, ready behind it; the second is given back and kClosed follows, soon, whatever the
// timeout.
TEST_F(IpcHostReadinessExporterProcess, AnImportWhoseExporterExitedUnreadyIsGivenBackThenClosed) {
  fork_exporter(
      [&](Exporter& exporter, PeerId peer) {
        const cudaStream_t done = fake().create_stream(0);
        const cudaStream_t busy = fake().create_stream(0);
        bool published = true;
        for (const float value : {1.0f, 2.0f, 3.0f}) {
          Tensor tensor = test::allocate(*pool_, {8});
          static_cast<float*>(tensor.data())[0] = value;
          if (value == 2.0f) {
            fake().launch(busy);  // never completed
          }
          published = published && tensor.set_readiness_stream(value == 2.0f ? busy : done) &&
                      exporter.publish(peer, tensor).has_value();
        }
        scope_.ipc().settle();
        return published;
      },
      [](test::Steps&) { return true; });
  ASSERT_TRUE(importer_.has_value());
  Tensor first = test::receive_one(*importer_);
  ASSERT_TRUE(first);
  EXPECT_EQ(static_cast<const float*>(first.data())[0], 1.0f);
  held(2);  // the second, and the third behind it (the Publishes may still have been on the way)
  EXPECT_EQ(importer_->outstanding(), 3u);
  ASSERT_TRUE(child_.steps().send('x'));
  EXPECT_EQ(child_.reap(), 0);
  const auto started = std::chrono::steady_clock::now();
  auto third = importer_->receive(5000);
  ASSERT_TRUE(third.has_value()) << third.error().message;
  ASSERT_TRUE(third->has_value()) << "a timeout";
  EXPECT_EQ(static_cast<const float*>((*third)->data())[0], 3.0f);
  EXPECT_EQ(importer_->outstanding(), 2u) << "the unready second was given back";
  auto after = importer_->receive(5000);
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(2));
  ASSERT_FALSE(after.has_value()) << (*after ? "a tensor" : "a timeout");
  EXPECT_EQ(after.error().code, ErrorCode::kClosed);
  EXPECT_EQ(importer_->awaiting_readiness(), 0u);
  first = Tensor();
  *third = Tensor();
  flush_deferred_releases();
  EXPECT_EQ(importer_->outstanding(), 0u);
}

// An event loop's receive(0) (one Publish read at most) finds the only import held unready and
// the exporter's process gone: the import is given back and the loop reads on to kClosed. It
// once kept asking the empty hold for ever, the caller's thread spinning.
TEST_F(IpcHostReadinessExporterProcess, AReceiveThatMustNotWaitEndsInClosedOnceNothingIsHeld) {
  fork_exporter(
      [&](Exporter& exporter, PeerId peer) {
        const cudaStream_t busy = fake().create_stream(0);
        Tensor tensor = test::allocate(*pool_, {8});
        fake().launch(busy);  // never completed
        const bool published =
            tensor.set_readiness_stream(busy) && exporter.publish(peer, tensor).has_value();
        scope_.ipc().settle();
        return published;
      },
      [](test::Steps&) { return true; });
  ASSERT_TRUE(importer_.has_value());
  ASSERT_TRUE(child_.steps().send('x'));  // exits before this process read anything
  EXPECT_EQ(child_.reap(), 0);
  Importer* importer = &*importer_;
  auto loop = std::async(std::launch::async, [importer] {
    for (int round = 0; round < 1000; ++round) {
      auto received = importer->receive(0);
      if (!received) {
        return received.error().code;
      }
      EXPECT_FALSE(received->has_value()) << "its producer never finished";
    }
    return ErrorCode::kSuccess;
  });
  if (loop.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
    // The loop's thread cannot be stopped: end the test binary rather than hang it.
    std::fprintf(stderr, "receive(0) has not returned in 5 s\n");
    std::_Exit(1);
  }
  EXPECT_EQ(loop.get(), ErrorCode::kClosed);
  EXPECT_EQ(importer_->awaiting_readiness(), 0u);
  flush_deferred_releases();
  EXPECT_EQ(importer_->outstanding(), 0u);
}

// The exporter hangs up with an import's work still running, and its process lives on: that work
// may still finish, so the import stays held (no kClosed yet), comes once its event completes,
// and kClosed follows.
TEST_F(IpcHostReadinessExporterProcess, AnImportOfAnExporterThatHungUpStillComesOnceReady) {
  cudaStream_t busy = nullptr;
  fork_exporter(
      [&](Exporter& exporter, PeerId peer) {
        busy = fake().create_stream(0);
        Tensor tensor = test::allocate(*pool_, {8});
        static_cast<float*>(tensor.data())[0] = 4.0f;
        fake().launch(busy);
        return tensor.set_readiness_stream(busy) && exporter.publish(peer, tensor).has_value();
      },
      [&](test::Steps& steps) {
        // Hung up now (the Exporter is gone, the export's memory kept for the importer).
        if (!steps.send('h') || steps.receive() != 'c') {
          return false;
        }
        fake().complete(busy);
        scope_.ipc().settle();
        return true;
      });
  ASSERT_TRUE(importer_.has_value());
  ASSERT_EQ(child_.steps().receive(), 'h');
  held(1);
  for (int i = 0; i < 3; ++i) {
    auto held = importer_->receive(5);
    ASSERT_TRUE(held.has_value()) << "no kClosed while its work may finish: "
                                  << held.error().message;
    EXPECT_FALSE(held->has_value());
  }
  ASSERT_TRUE(child_.steps().send('c'));
  auto ready = importer_->receive(5000);
  ASSERT_TRUE(ready.has_value()) << ready.error().message;
  ASSERT_TRUE(ready->has_value()) << "a timeout";
  EXPECT_EQ(static_cast<const float*>((*ready)->data())[0], 4.0f);
  auto after = importer_->receive(0);
  ASSERT_FALSE(after.has_value());
  EXPECT_EQ(after.error().code, ErrorCode::kClosed);
  *ready = Tensor();
  flush_deferred_releases();
  EXPECT_EQ(importer_->outstanding(), 0u);
  ASSERT_TRUE(child_.steps().send('x'));
  EXPECT_EQ(child_.reap(), 0);
}

}  // namespace
}  // namespace holoscan::ipc
