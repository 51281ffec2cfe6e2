// Covers an importer in another process (fork) on the fake runtimes, whose interprocess events
// and VMM memory are shared with the child: the child reads what the parent wrote, its host wait
// ends when the parent's producer finishes, and the parent's block comes back only after the
// child's release event completes; a child killed with SIGKILL gives back every block once it has
// exited, none twice; an exporter destroyed under a live import keeps the memory.
//
// The child reports through its exit status and talks to the parent through one-byte messages
// on pipes; it never returns into the test framework.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

#include "holoscan/ipc.hpp"
#include "holoscan/tensor_pool.hpp"
#include "support/fake_cuda_ipc.hpp"
#include "support/gtest_printers.hpp"
#include "support/ipc_child.hpp"
#include "support/ipc_peers.hpp"
#include "support/ipc_raw_socket.hpp"
#include "support/thread_sanitizer.hpp"

namespace holoscan::ipc {
namespace {

class IpcProcess : public ::testing::Test {
 protected:
  void SetUp() override {
#ifdef HDL_THREAD_SANITIZER
    // The fake runtime remakes its mutex in a forked child (fake_cuda.cpp, renew_after_fork), and
    // ThreadSanitizer takes the first lock of the remade mutex for a double lock and stops the
    // child. The importer child here uses the fake throughout; the other presets run these tests.
    GTEST_SKIP() << "forked children that use the fake runtime cannot run under ThreadSanitizer";
#endif
    fds_before_ = test::open_fd_count();
    ASSERT_EQ(pending_deferred_releases(), 0u);
    signals_.open();
    ASSERT_TRUE(signals_.ok());
    auto exporter = Exporter::create();
    ASSERT_TRUE(exporter.has_value()) << exporter.error().message;
    exporter_.emplace(std::move(*exporter));
  }

  void TearDown() override {
    if (IsSkipped()) {
      return;
    }
    if (child_ > 0) {
      ::kill(child_, SIGKILL);
      (void)::waitpid(child_, nullptr, 0);
    }
    if (exporter_) {
      EXPECT_TRUE(test::poll_until(*exporter_, [&] { return exporter_->held() == 0; }));
      exporter_.reset();
    }
    pool_.reset();
    signals_.close();
    scope_.reset();
    EXPECT_EQ(test::open_fd_count(), fds_before_) << "descriptor leak";
  }

  // Forks a child that runs `child` with its end of a channel and exits with what it returns;
  // the parent adds the other end as a peer.
  template <class Child>
  void fork_importer(Child child) {
    auto ends = Channel::pair();
    ASSERT_TRUE(ends.has_value());
    child_ = ::fork();
    ASSERT_GE(child_, 0);
    if (child_ == 0) {
      signals_.become_child();
      Channel mine = std::move(ends->second);
      { Channel theirs = std::move(ends->first); }
      ::_exit(child(std::move(mine)));
    }
    signals_.become_parent();
    { Channel theirs = std::move(ends->second); }
    auto peer = exporter_->add_peer(std::move(ends->first), 10000);
    ASSERT_TRUE(peer.has_value()) << peer.error().message;
    peer_ = *peer;
  }

  // The child's exit status (-1 unless it exited normally), reaped.
  int reap() {
    int status = 0;
    EXPECT_EQ(::waitpid(child_, &status, 0), child_);
    child_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  test::FakeCuda& fake() { return scope_->fake(); }
  test::FakeCudaIpc& ipc() { return scope_->ipc(); }

  int fds_before_ = 0;
  std::optional<test::FakeCudaIpcScope> scope_{std::in_place};
  test::Steps signals_;
  std::shared_ptr<TensorPool> pool_;
  std::optional<Exporter> exporter_;
  PeerId peer_ = 0;
  pid_t child_ = -1;
};

TEST_F(IpcProcess, ForkedImporterReadsTheDataAndItsReleaseWaitsForItsStream) {
  pool_ = test::make_device_pool(1024, 2, test::PoolKind::kShareable);
  ASSERT_NE(pool_, nullptr);
  const cudaStream_t producer = fake().create_stream(0);
  Tensor produced = test::allocate(*pool_, {64});
  for (int i = 0; i < 64; ++i) {
    static_cast<float*>(produced.data())[i] = static_cast<float>(i * 3);
  }
  fake().launch(producer);
  ASSERT_TRUE(produced.set_readiness_stream(producer));

  fork_importer([this](Channel channel) {
    // Readiness waited for on the consumer's stream: the import comes before the producer ends.
    auto importer =
        Importer::create(std::move(channel), test::readiness_options(ReadinessWait::kOnGpu, 10000));
    if (!importer) {
      return 10;
    }
    auto received = importer->receive(10000);
    if (!received || !*received) {
      return 11;
    }
    Tensor tensor = std::move(**received);
    const auto* data = tensor.data_as<float>();
    for (int i = 0; i < 64; ++i) {
      if (data[i] != static_cast<float>(i * 3)) {
        return 12;
      }
    }
    signals_.send('i');
    if (!tensor.synchronize_for_host()) {  // ends once the parent's producer has finished
      return 13;
    }
    signals_.send('h');
    const cudaStream_t consumer = test::FakeCuda::instance().create_stream(0);
    test::FakeCuda::instance().launch(consumer);
    if (!tensor.synchronize_for_consumer_stream(consumer) ||
        !tensor.set_deallocation_stream(consumer)) {
      return 14;
    }
    tensor = Tensor();
    signals_.send('r');
    if (signals_.receive() != 'g') {
      return 15;
    }
    test::FakeCuda::instance().complete(consumer);
    test::FakeCudaIpc::instance().settle();
    signals_.send('c');
    return signals_.receive() == 'x' ? 0 : 16;
  });
  ASSERT_TRUE(exporter_->publish(peer_, produced).has_value());
  produced = Tensor();

  ASSERT_EQ(signals_.receive(), 'i') << "the child did not import the data";
  EXPECT_EQ(signals_.receive(50), 0) << "the child's host wait ended before the producer did";
  fake().complete(producer);
  ipc().settle();
  ASSERT_EQ(signals_.receive(), 'h');

  ASSERT_EQ(signals_.receive(), 'r');
  ASSERT_TRUE(test::poll_until(*exporter_, [&] { return exporter_->stats().releases == 1; }));
  for (int i = 0; i < 3; ++i) {
    (void)exporter_->poll();
  }
  EXPECT_EQ(exporter_->held(), 1u) << "dropped while the child's consumer still runs";
  EXPECT_EQ(pool_->available_blocks(), 1u);
  ASSERT_TRUE(signals_.send('g'));
  ASSERT_EQ(signals_.receive(), 'c');
  ASSERT_TRUE(test::poll_until(*exporter_, [&] { return exporter_->held() == 0; }));
  EXPECT_EQ(pool_->available_blocks(), 2u);
  ASSERT_TRUE(signals_.send('x'));
  EXPECT_EQ(reap(), 0);
  ASSERT_TRUE(test::poll_until(*exporter_, [&] { return !exporter_->connected(peer_); }));
}

TEST_F(IpcProcess, KilledImporterGivesEveryBlockBackOnceItHasExitedAndNoneTwice) {
  pool_ = test::make_device_pool(1024, 3, test::PoolKind::kShareable);
  ASSERT_NE(pool_, nullptr);
  fork_importer([this](Channel channel) {
    auto importer = Importer::create(std::move(channel), 10000);
    if (!importer) {
      return 10;
    }
    std::vector<Tensor> imports;
    for (int i = 0; i < 3; ++i) {
      auto received = importer->receive(10000);
      if (!received || !*received) {
        return 11;
      }
      imports.push_back(std::move(**received));
    }
    const cudaStream_t consumer = test::FakeCuda::instance().create_stream(0);
    test::FakeCuda::instance().launch(consumer);
    if (!imports[0].set_deallocation_stream(consumer)) {
      return 12;
    }
    imports[0] = Tensor();  // released behind the consumer's work; the other two are kept
    signals_.send('r');
    if (signals_.receive() != 'g') {
      return 13;
    }
    test::FakeCuda::instance().complete(consumer);
    test::FakeCudaIpc::instance().settle();
    signals_.send('c');
    for (;;) {
      ::pause();  // until killed
    }
  });
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(exporter_->publish(peer_, test::allocate(*pool_, {16})).has_value());
  }
  ASSERT_EQ(signals_.receive(), 'r');
  ASSERT_TRUE(test::poll_until(*exporter_, [&] { return exporter_->stats().releases == 1; }));
  EXPECT_EQ(exporter_->held(), 3u) << "dropped before the child's release event completed";
  EXPECT_EQ(pool_->available_blocks(), 0u);
  ASSERT_TRUE(signals_.send('g'));
  ASSERT_EQ(signals_.receive(), 'c');
  ASSERT_TRUE(test::poll_until(*exporter_, [&] { return exporter_->held() == 2; }));
  EXPECT_EQ(pool_->available_blocks(), 1u);

  ASSERT_EQ(::kill(child_, SIGKILL), 0);
  ASSERT_TRUE(test::poll_until(*exporter_, [&] { return exporter_->held() == 0; }))
      << "the killed child's claims were never dropped";
  EXPECT_FALSE(exporter_->connected(peer_));
  EXPECT_EQ(exporter_->stats().dropped, 3u) << "a claim dropped twice, or not at all";
  EXPECT_EQ(pool_->available_blocks(), 3u);
  EXPECT_EQ(reap(), -1) << "the child exited by itself";
  // The blocks are whole again: each can be handed out and exported once more.
  std::vector<Tensor> again;
  for (int i = 0; i < 3; ++i) {
    again.push_back(test::allocate(*pool_, {16}));
    ASSERT_TRUE(again.back());
  }
  EXPECT_EQ(pool_->reuse_count(), 3u);
}

// An importer that hangs up and exits later: its claims wait for the exit, and the exit makes
// Exporter::fd() readable, so that a loop asleep on fd() wakes to drop them.
TEST_F(IpcProcess, AnImporterThatHungUpBeforeItExitsStillWakesTheExportersFdAtItsExit) {
  pool_ = test::make_device_pool(1024, 1, test::PoolKind::kShareable);
  ASSERT_NE(pool_, nullptr);
  fork_importer([this](Channel channel) {
    auto importer = Importer::create(std::move(channel), 10000);
    if (!importer) {
      return 10;
    }
    auto received = importer->receive(10000);
    if (!received || !*received) {
      return 11;
    }
    Tensor kept = std::move(**received);
    ::shutdown(importer->fd(), SHUT_RDWR);  // hangs up, still holding the import
    signals_.send('h');
    return signals_.receive() == 'x' ? 0 : 12;  // exits with the import held
  });
  ASSERT_TRUE(exporter_->publish(peer_, test::allocate(*pool_, {16})).has_value());
  ASSERT_EQ(signals_.receive(), 'h');
  ASSERT_TRUE(test::poll_until(*exporter_, [&] { return !exporter_->connected(peer_); }));
  EXPECT_EQ(exporter_->held(), 1u) << "a hang-up alone drops nothing while the process lives";
  pollfd asleep{exporter_->fd(), POLLIN, 0};
  EXPECT_EQ(::poll(&asleep, 1, 0), 0) << "fd() is readable while nothing happened";

  // A child forked now (a launcher, say) holds copies of every descriptor the exporter has.
  const pid_t bystander = ::fork();
  ASSERT_GE(bystander, 0);
  if (bystander == 0) {
    for (;;) {
      ::pause();  // until killed
    }
  }
  ASSERT_TRUE(signals_.send('x'));
  EXPECT_EQ(reap(), 0);
  asleep.revents = 0;
  EXPECT_EQ(::poll(&asleep, 1, 5000), 1) << "the importer's exit did not make fd() readable";
  ASSERT_TRUE(exporter_->poll().has_value());
  EXPECT_EQ(exporter_->held(), 0u);
  EXPECT_EQ(pool_->available_blocks(), 1u);
  EXPECT_EQ(::poll(&asleep, 1, 0), 0)
      << "fd() is still readable once the peer is forgotten (the forked child's copy of its "
         "pidfd kept it in the epoll set)";
  ::kill(bystander, SIGKILL);
  (void)::waitpid(bystander, nullptr, 0);
}

TEST_F(IpcProcess, ExporterDestroyedUnderALiveImportKeepsTheMemory) {
  // All in a child: the memory kept is never freed before that process exits.
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto run = [] {
      auto pool = test::make_device_pool(1024, 1, test::PoolKind::kShareable);
      auto exporter = Exporter::create();
      if (pool == nullptr || !exporter) {
        return 10;
      }
      auto connected = test::connect_importer(*exporter);
      if (!connected.importer) {
        return 11;
      }
      Tensor tensor = test::allocate(*pool, {16});
      static_cast<float*>(tensor.data())[0] = 42.0f;
      if (!exporter->publish(connected.peer, tensor)) {
        return 12;
      }
      tensor = Tensor();
      auto received = connected.importer->receive(10000);
      if (!received || !*received) {
        return 13;
      }
      exporter = Exporter::create();  // the first exporter is destroyed here
      if (pool->available_blocks() != 0) {
        return 14;  // the block would be handed out while the importer reads it
      }
      return (**received).data_as<float>()[0] == 42.0f ? 0 : 15;
    };
    ::_exit(run());
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "status " << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace holoscan::ipc
