// Covers an importer process that dies: a forked child connects, takes two exports, releases one
// behind a GPU event that never completes and is killed with SIGKILL. The exporter must see
// end-of-file, and its ledger must drop both claims once the child has exited (real pidfd
// liveness), or, with fake liveness, the released one after its event and the other at exit.
//
// The child runs only async-signal-safe calls on data prepared before fork(), since the test
// process may have other threads.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "holoscan/ipc/channel.hpp"
#include "holoscan/ipc/claims.hpp"
#include "holoscan/ipc/liveness.hpp"
#include "support/gtest_printers.hpp"
#include "support/ipc_fakes.hpp"
#include "support/ipc_raw_socket.hpp"
#include "support/ipc_samples.hpp"

namespace holoscan::ipc {
namespace {

using Bytes = std::vector<std::uint8_t>;

// Connects to `address`, waits for one record, sends `release`, then waits to be killed.
[[noreturn]] void run_importer(const sockaddr_un& address, const Bytes& release) {
  const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET, 0);
  if (fd < 0 || ::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    ::_exit(2);
  }
  char record[1024];
  if (::recv(fd, record, sizeof(record), 0) <= 0 ||
      ::send(fd, release.data(), release.size(), MSG_NOSIGNAL) < 0) {
    ::_exit(3);
  }
  for (;;) {
    ::pause();
  }
}

class IpcPeerDeath : public ::testing::Test {
 protected:
  void SetUp() override {
    fds_before_ = test::open_fd_count();
    char dir[] = "/tmp/holoscan-ipc-XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    dir_ = dir;
    const std::string path = dir_ + "/socket";
    auto listener = Listener::listen(path);
    ASSERT_TRUE(listener.has_value()) << listener.error().message;
    listener_.emplace(std::move(*listener));

    Release release;
    release.export_id = 1;
    release.has_event = true;
    release.event.fill(0x5a);
    const Bytes frame = test::raw_frame(release);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::memcpy(address.sun_path, path.c_str(), path.size() + 1);

    child_ = ::fork();
    ASSERT_GE(child_, 0);
    if (child_ == 0) {
      run_importer(address, frame);
    }
    auto accepted = listener_->accept(5000);
    ASSERT_TRUE(accepted && *accepted) << (accepted ? "timeout" : accepted.error().message);
    channel_.emplace(std::move(**accepted));
  }

  void TearDown() override {
    if (child_ > 0) {
      ::kill(child_, SIGKILL);
      reap();
    }
    channel_.reset();
    listener_.reset();
    ::rmdir(dir_.c_str());
    EXPECT_EQ(test::open_fd_count(), fds_before_) << "descriptor leak";
  }

  void reap() {
    int status = 0;
    ASSERT_EQ(::waitpid(child_, &status, 0), child_);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;
    child_ = -1;
  }

  // Holds exports 1 and 2 for the child, publishes them and takes its release of export 1,
  // whose event is `event_done`.
  void export_two_and_take_release(const test::Flag& event_done) {
    for (std::uint64_t id : {1u, 2u}) {
      TensorDescriptor d = test::sample_descriptor();
      d.export_id = id;
      ASSERT_TRUE(ledger_.add(kPeer, id, [this, id] { dropped_.push_back(id); }));
      ASSERT_TRUE(channel_->send(Publish{test::encoded(d), UniqueFd()}, 5000));
    }
    auto got = channel_->receive(5000);
    ASSERT_TRUE(got && *got) << (got ? "timeout" : got.error().message);
    const Release& release = std::get<Release>(**got);
    EXPECT_EQ(release.export_id, 1u);
    EXPECT_TRUE(release.has_event);
    EXPECT_TRUE(ledger_.on_release(kPeer, release.export_id, test::fake_event(event_done)));
    EXPECT_EQ(ledger_.poll(), 0u);
  }

  // Kills the child and expects end-of-file on the channel.
  void kill_child_and_see_eof() {
    ASSERT_EQ(::kill(child_, SIGKILL), 0);
    auto got = channel_->receive(5000);
    ASSERT_FALSE(got.has_value()) << "expected end-of-file";
    EXPECT_EQ(got.error().code, kChannelClosed);
    EXPECT_TRUE(channel_->closed());
  }

  static constexpr PeerId kPeer = 42;
  int fds_before_ = 0;
  std::string dir_;
  pid_t child_ = -1;
  std::optional<Listener> listener_;
  std::optional<Channel> channel_;
  std::vector<std::uint64_t> dropped_;
  ExportLedger ledger_;
};

TEST_F(IpcPeerDeath, KilledImporterReleasesEveryClaimOnceItHasExited) {
  auto peer_pid = channel_->peer_pid();
  ASSERT_TRUE(peer_pid.has_value());
  EXPECT_EQ(*peer_pid, child_);
  // Opened while the child is connected: it can only ever name that process.
  auto liveness = watch_peer(*channel_);
  ASSERT_TRUE(liveness.has_value()) << liveness.error().message;
  EXPECT_FALSE((*liveness)->exited());

  export_two_and_take_release(test::make_flag());  // an event that never completes
  kill_child_and_see_eof();
  EXPECT_EQ(ledger_.on_peer_closed(kPeer, std::move(*liveness)), 2u);
  reap();  // the pidfd is readable from the child's exit on; reaping makes that certain here
  EXPECT_EQ(ledger_.poll(), 2u);
  EXPECT_EQ(dropped_.size(), 2u);
  EXPECT_EQ(ledger_.held(), 0u);
}

TEST_F(IpcPeerDeath, ReleasedClaimDropsAfterItsEventAndTheRestAtExit) {
  const auto event_done = test::make_flag();
  const auto exited = test::make_flag();
  export_two_and_take_release(event_done);
  kill_child_and_see_eof();
  EXPECT_EQ(ledger_.on_peer_closed(kPeer, test::fake_liveness(exited)), 2u);
  EXPECT_EQ(ledger_.poll(), 0u);
  *event_done = true;
  EXPECT_EQ(ledger_.poll(), 1u);
  EXPECT_EQ(dropped_, std::vector<std::uint64_t>{1});
  *exited = true;
  EXPECT_EQ(ledger_.poll(), 1u);
  EXPECT_EQ(dropped_, (std::vector<std::uint64_t>{1, 2}));
}

TEST(IpcLiveness, PidfdTurnsExitedWhenTheProcessDies) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    for (;;) {
      ::pause();
    }
  }
  auto liveness = watch_process(child);
  ASSERT_TRUE(liveness.has_value()) << liveness.error().message;
  EXPECT_FALSE((*liveness)->exited());
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE((*liveness)->exited());
  EXPECT_TRUE((*liveness)->exited()) << "stays exited";
}

TEST(IpcLiveness, RefusesWhatIsNotAProcess) {
  auto none = watch_process(0);
  ASSERT_FALSE(none.has_value());
  EXPECT_EQ(none.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(none.error().message, "ipc liveness: pid 0 is not a process id");
  auto missing = watch_process(0x7ffffff0);  // above any pid_max Linux allows
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().code, ErrorCode::kFailure);
}

// A descriptor that is no pidfd turns readable for its own reasons (a socket with data): taken
// for a pidfd, that read as the peer's exit, and its claims would drop under its reads.
TEST(IpcLiveness, RefusesADescriptorThatIsNoPidfd) {
  int ends[2] = {-1, -1};
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, ends), 0);
  UniqueFd other(ends[1]);
  ASSERT_EQ(::write(other.get(), "x", 1), 1);  // readable, as a pidfd of an exited process is
  const std::string named = "descriptor " + std::to_string(ends[0]) + " is not a pidfd";
  auto socket = watch_pidfd(UniqueFd(ends[0]));
  ASSERT_FALSE(socket.has_value()) << "a socket was watched as a process";
  EXPECT_EQ(socket.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(socket.error().message, "ipc liveness: " + named);
  auto own = watch_pidfd(UniqueFd(static_cast<int>(::syscall(SYS_pidfd_open, ::getpid(), 0))));
  ASSERT_TRUE(own.has_value()) << own.error().message;
  EXPECT_FALSE((*own)->exited());
}

}  // namespace
}  // namespace holoscan::ipc
