// Covers which process an Exporter watches when a third process made the socket: a launcher
// creates the pair, hands one end to the exporter (this test) and the other to an importer it
// does not start itself (a forked child without CUDA). The kernel's record of the socket
// (SO_PEERCRED, SO_PEERPIDFD) names the launcher; the claims must follow the importer, the
// process that maps the memory: they drop once it has exited, whether or not the launcher still
// holds the socket, and a hang-up while it still runs drops nothing.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <chrono>
#include <thread>
#include <utility>
#include <vector>

#include "support/gtest_printers.hpp"
#include "support/ipc_exporter_test.hpp"
#include "support/ipc_peers.hpp"
#include "support/ipc_raw_socket.hpp"

namespace holoscan::ipc {
namespace {

class IpcPeerIdentity : public test::ExporterTest {
 protected:
  void SetUp() override {
    ExporterTest::SetUp();
    int control[2] = {-1, -1};
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, control), 0);
    UniqueFd mine(control[0]);
    UniqueFd launchers(control[1]);
    // The launcher makes the pair, sends both ends here, and keeps its copies until told to go.
    ASSERT_TRUE(launcher_.start([&] {
      int ends[2] = {-1, -1};
      if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ends) != 0 ||
          !test::send_raw(launchers.get(), {1}, {ends[0], ends[1]})) {
        return 2;
      }
      return launcher_.steps().receive(60000) == 'x' ? 0 : 3;
    }));
    launchers.reset();
    ends_ = test::receive_fds(mine.get(), 10000);
    ASSERT_EQ(ends_.size(), 2u) << "the launcher sent no socket";
  }

  void TearDown() override {
    ends_.clear();
    if (launcher_.pid() > 0) {
      launcher_.steps().send('x');
      EXPECT_EQ(launcher_.reap(), 0);
    }
    launcher_.steps().close();
    ExporterTest::TearDown();
  }

  // Starts the importer on the launcher's second end and adds the first as a peer; the importer
  // takes two exports, says 'p', hangs up when told ('h', then says 'c') and runs until killed.
  void start_importer_and_publish_two() {
    UniqueFd importer_end = std::move(ends_[1]);
    ASSERT_TRUE(importer_.start([&] {
      auto channel = Channel::adopt(std::move(importer_end));
      if (!channel || !test::importer_hello(*channel) || !test::next_publish(*channel) ||
          !test::next_publish(*channel)) {
        return 10;
      }
      importer_.steps().send('p');
      if (importer_.steps().receive(60000) == 'h') {
        { Channel hung_up = std::move(*channel); }
        importer_.steps().send('c');
      }
      for (;;) {
        ::pause();
      }
    }));
    importer_end.reset();
    auto channel = Channel::adopt(std::move(ends_[0]));
    ASSERT_TRUE(channel.has_value()) << channel.error().message;
    peer_ = add_peer(std::move(*channel));
    ASSERT_NE(peer_, 0u);
    for (int i = 0; i < 2; ++i) {
      ASSERT_TRUE(exporter_->publish(peer_, test::allocate(*pool_, {16})).has_value());
    }
    ASSERT_EQ(importer_.steps().receive(), 'p');
  }

  // Polls for `ms` milliseconds.
  void poll_for(int ms) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (std::chrono::steady_clock::now() < end) {
      (void)exporter_->poll();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  test::Child launcher_;
  std::vector<UniqueFd> ends_;
  PeerId peer_ = 0;
};

TEST_F(IpcPeerIdentity, ClaimsDropOnceTheImporterExitsWhileTheLauncherHoldsTheSocket) {
  start_importer_and_publish_two();
  EXPECT_EQ(exporter_->held(), 2u);
  ASSERT_TRUE(importer_.kill());
  EXPECT_EQ(importer_.reap(), -1);
  ASSERT_TRUE(test::poll_until(*exporter_, [&] { return exporter_->held() == 0; }))
      << "the claims wait for the launcher, which is not the process that maps the memory";
  EXPECT_FALSE(exporter_->connected(peer_)) << "its importer has exited";
  EXPECT_EQ(pool_->available_blocks(), blocks_);
  EXPECT_EQ(exporter_->stats().dropped, 2u);
}

TEST_F(IpcPeerIdentity, HangUpWhileTheImporterRunsKeepsItsClaimsUntilItExits) {
  start_importer_and_publish_two();
  ASSERT_TRUE(launcher_.steps().send('x'));
  EXPECT_EQ(launcher_.reap(), 0);  // the launcher is gone, and its copies of the socket
  ASSERT_TRUE(importer_.steps().send('h'));
  ASSERT_EQ(importer_.steps().receive(), 'c');
  ASSERT_TRUE(test::poll_until(*exporter_, [&] { return !exporter_->connected(peer_); }))
      << "no end-of-file after every copy of the importer's end was closed";
  poll_for(100);
  EXPECT_EQ(exporter_->held(), 2u) << "dropped while the importer still runs";
  EXPECT_EQ(pool_->available_blocks(), 0u);
  ASSERT_TRUE(importer_.kill());
  EXPECT_EQ(importer_.reap(), -1);
  ASSERT_TRUE(test::poll_until(*exporter_, [&] { return exporter_->held() == 0; }));
  EXPECT_EQ(pool_->available_blocks(), blocks_);
}

}  // namespace
}  // namespace holoscan::ipc
