// Covers the channel: message round trips, fd passing, timeouts, refusal of malformed frames and
// stray descriptors sent by a hostile peer, end-of-file, SIGPIPE safety, listeners and paths.
// Every test checks that it leaves no descriptor open.
#include <dirent.h>
#include <gtest/gtest.h>
#include <pthread.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "holoscan/ipc/channel.hpp"
#include "ipc/transport/ipc_identity.hpp"
#include "support/allocation_hooks.hpp"
#include "support/gtest_printers.hpp"
#include "support/ipc_raw_socket.hpp"
#include "support/ipc_samples.hpp"

namespace holoscan::ipc {
namespace {

using Bytes = std::vector<std::uint8_t>;
using test::encoded;
using test::raw_frame;
using test::sample_descriptor;
using test::send_raw;

class IpcChannel : public ::testing::Test {
 protected:
  void SetUp() override { fds_before_ = test::open_fd_count(); }
  void TearDown() override {
    channel_.reset();
    raw_.reset();
    EXPECT_EQ(test::open_fd_count(), fds_before_) << "descriptor leak";
  }

  // A channel end whose peer is a raw socket, to send frames no Channel would.
  void make_raw_pair() {
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
    raw_ = UniqueFd(sv[0]);
    auto channel = Channel::adopt(UniqueFd(sv[1]));
    ASSERT_TRUE(channel.has_value()) << channel.error().message;
    channel_.emplace(std::move(*channel));
  }

  // Receives one frame and expects its refusal with `message`.
  void expect_refused(const std::string& message, ErrorCode code = ErrorCode::kInvalidArgument) {
    auto got = channel_->receive(1000);
    ASSERT_FALSE(got.has_value()) << "a malformed frame was accepted";
    EXPECT_EQ(got.error().code, code);
    EXPECT_EQ(got.error().message, message);
    EXPECT_FALSE(channel_->closed());
  }

  int fds_before_ = 0;
  UniqueFd raw_;
  std::optional<Channel> channel_;
};

Publish fake_publish() { return Publish{encoded(sample_descriptor()), UniqueFd()}; }

Release release_with_event(std::uint64_t export_id) {
  Release release;
  release.export_id = export_id;
  release.has_event = true;
  for (std::size_t i = 0; i < release.event.size(); ++i) {
    release.event[i] = static_cast<std::uint8_t>(i + 1);
  }
  return release;
}

UniqueFd memfd_with(const std::string& text) {
  UniqueFd fd(::memfd_create("holoscan-ipc-test", MFD_CLOEXEC));
  EXPECT_TRUE(fd.valid());
  EXPECT_EQ(::write(fd.get(), text.data(), text.size()), static_cast<ssize_t>(text.size()));
  return fd;
}

TEST_F(IpcChannel, EveryMessageRoundTrips) {
  auto ends = Channel::pair();
  ASSERT_TRUE(ends.has_value()) << ends.error().message;
  auto& [a, b] = *ends;
  ASSERT_TRUE(a.send(Hello{static_cast<std::uint32_t>(::getpid()), kProtocolVersion}));
  ASSERT_TRUE(a.send(fake_publish()));
  ASSERT_TRUE(a.send(release_with_event(7)));
  ASSERT_TRUE(a.send(Release{9, false, {}}));

  auto hello = b.receive(1000);
  ASSERT_TRUE(hello && *hello) << (hello ? "timeout" : hello.error().message);
  EXPECT_EQ(std::get<Hello>(**hello).pid, static_cast<std::uint32_t>(::getpid()));
  EXPECT_EQ(std::get<Hello>(**hello).protocol_version, kProtocolVersion);
  EXPECT_TRUE(std::get<Hello>(**hello).process.valid()) << "the sender's pidfd, proven";

  auto publish = b.receive(1000);
  ASSERT_TRUE(publish && *publish);
  const Publish& p = std::get<Publish>(**publish);
  EXPECT_FALSE(p.fd.valid());
  auto descriptor = decode(p.descriptor.data(), p.descriptor.size());
  ASSERT_TRUE(descriptor.has_value());
  EXPECT_EQ(*descriptor, sample_descriptor());

  auto release = b.receive(1000);
  ASSERT_TRUE(release && *release);
  EXPECT_EQ(std::get<Release>(**release).export_id, 7u);
  EXPECT_TRUE(std::get<Release>(**release).has_event);
  EXPECT_EQ(std::get<Release>(**release).event, release_with_event(7).event);

  auto bare = b.receive(1000);
  ASSERT_TRUE(bare && *bare);
  EXPECT_EQ(std::get<Release>(**bare).export_id, 9u);
  EXPECT_FALSE(std::get<Release>(**bare).has_event);
}

TEST_F(IpcChannel, PassesAPosixFdThatReadsBack) {
  auto ends = Channel::pair();
  ASSERT_TRUE(ends.has_value());
  TensorDescriptor d = sample_descriptor();
  d.handle_kind = MemoryHandleKind::kPosixFd;
  Publish publish{encoded(d), memfd_with("exported bytes")};
  ASSERT_TRUE(ends->first.send(publish));
  EXPECT_TRUE(publish.fd.valid()) << "send() lends the fd, it keeps its own";

  auto got = ends->second.receive(1000);
  ASSERT_TRUE(got && *got) << (got ? "timeout" : got.error().message);
  const UniqueFd& fd = std::get<Publish>(**got).fd;
  ASSERT_TRUE(fd.valid());
  EXPECT_NE(fd.get(), publish.fd.get());
  EXPECT_NE(::fcntl(fd.get(), F_GETFD) & FD_CLOEXEC, 0) << "received fds are close-on-exec";
  char text[32] = {};
  ASSERT_EQ(::pread(fd.get(), text, sizeof(text), 0), 14);
  EXPECT_STREQ(text, "exported bytes");
}

TEST_F(IpcChannel, ReceiveTimesOutWithNothing) {
  auto ends = Channel::pair();
  ASSERT_TRUE(ends.has_value());
  auto got = ends->second.receive(20);
  ASSERT_TRUE(got.has_value()) << got.error().message;
  EXPECT_FALSE(got->has_value());
  got = ends->second.receive(0);
  ASSERT_TRUE(got.has_value());
  EXPECT_FALSE(got->has_value());
}

TEST_F(IpcChannel, SendRefusesWhatThePeerWouldRefuse) {
  auto ends = Channel::pair();
  ASSERT_TRUE(ends.has_value());
  Channel& a = ends->first;
  auto sent = a.send(Hello{0, kProtocolVersion});
  ASSERT_FALSE(sent.has_value());
  EXPECT_EQ(sent.error().message, "ipc channel: hello pid is 0");
  sent = a.send(Hello{1, kProtocolVersion, UniqueFd(), static_cast<PeerRole>(3)});
  ASSERT_FALSE(sent.has_value());
  EXPECT_EQ(sent.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(sent.error().message,
            "ipc channel: hello role 3 is neither an Exporter (1) nor an Importer (2)");

  sent = a.send(Publish{Bytes(10, 0), UniqueFd()});
  ASSERT_FALSE(sent.has_value());
  EXPECT_EQ(sent.error().code, ErrorCode::kInvalidArgument);

  TensorDescriptor d = sample_descriptor();
  d.handle_kind = MemoryHandleKind::kPosixFd;
  d.allocation_id = 0;  // no id: the importer cannot have it mapped already
  sent = a.send(Publish{encoded(d), UniqueFd()});
  ASSERT_FALSE(sent.has_value());
  EXPECT_EQ(sent.error().message,
            "ipc channel: publish of export 7 carries 0 file descriptors, its handle kind needs 1");

  d.allocation_id = 3;
  sent = a.send(Publish{encoded(d), UniqueFd(), 3});
  ASSERT_FALSE(sent.has_value());
  EXPECT_EQ(sent.error().message, "ipc channel: publish of export 7 forgets its own allocation 3");

  Release refusal{4, true, release_with_event(4).event, /*refused=*/true};
  sent = a.send(refusal);
  ASSERT_FALSE(sent.has_value());
  EXPECT_EQ(sent.error().message, "ipc channel: release is a refusal with an event");

  sent = a.send(Publish{encoded(sample_descriptor()), memfd_with("x")});
  ASSERT_FALSE(sent.has_value());
  EXPECT_EQ(sent.error().message,
            "ipc channel: publish of export 7 carries 1 file descriptors, its handle kind needs 0");

  Release release = release_with_event(3);
  release.has_event = false;
  sent = a.send(release);
  ASSERT_FALSE(sent.has_value());
  EXPECT_EQ(sent.error().message,
            "ipc channel: release event is not all zero while has_event is false");

  auto got = ends->second.receive(0);
  ASSERT_TRUE(got.has_value());
  EXPECT_FALSE(got->has_value()) << "nothing refused may reach the peer";
}

TEST_F(IpcChannel, UndersizedAndOversizedFramesAreRefused) {
  make_raw_pair();
  ASSERT_TRUE(send_raw(raw_.get(), Bytes{1, 0, 0, 0}));
  expect_refused("ipc channel: frame of 4 bytes is shorter than its 8-byte header");

  // An empty record reads like end-of-file; it must not be taken for the peer's death.
  ASSERT_TRUE(send_raw(raw_.get(), Bytes{}));
  expect_refused("ipc channel: frame of 0 bytes is shorter than its 8-byte header");

  Bytes huge = raw_frame(fake_publish());
  huge.resize(kMaxDescriptorBytes + 17, 0);  // header, forget_allocation, descriptor, one more
  ASSERT_TRUE(send_raw(raw_.get(), huge));
  expect_refused("ipc channel: frame is larger than the largest valid frame (744 bytes)");

  Bytes hello = raw_frame(Hello{1, kProtocolVersion});
  hello[4] = 9;  // length field
  ASSERT_TRUE(send_raw(raw_.get(), hello));
  expect_refused("ipc channel: frame length field says 9 payload bytes, the frame has 12");

  Bytes release = raw_frame(Release{1, false, {}});
  release.pop_back();
  release[4] -= 1;
  ASSERT_TRUE(send_raw(raw_.get(), release));
  expect_refused(
      "ipc channel: release of 79 bytes with 0 file descriptors, expected 80 bytes and none");
}

TEST_F(IpcChannel, MalformedPayloadsAreRefused) {
  make_raw_pair();
  Bytes frame = raw_frame(Hello{1, kProtocolVersion});
  frame[0] = 4;
  ASSERT_TRUE(send_raw(raw_.get(), frame));
  expect_refused("ipc channel: frame type 4 is not hello (1), publish (2) or release (3)");

  frame = raw_frame(Hello{1, 1});  // a version-1 peer, whose Hello proves nothing
  ASSERT_TRUE(send_raw(raw_.get(), frame));
  expect_refused("ipc channel: peer speaks protocol version 1, this build speaks 4",
                 ErrorCode::kIncompatible);

  frame = raw_frame(Hello{1, 2});  // a version-2 peer: every Publish carries its fd
  ASSERT_TRUE(send_raw(raw_.get(), frame));
  expect_refused("ipc channel: peer speaks protocol version 2, this build speaks 4",
                 ErrorCode::kIncompatible);

  // A version-3 peer's Hello has no role, and so 8 bytes: it is told its version is another,
  // not that its Hello is malformed.
  frame = raw_frame(Hello{1, 3});
  frame.resize(8 + 8);
  frame[4] = 8;
  ASSERT_TRUE(send_raw(raw_.get(), frame));
  expect_refused("ipc channel: peer speaks protocol version 3, this build speaks 4",
                 ErrorCode::kIncompatible);

  frame = raw_frame(Hello{1, kProtocolVersion});
  frame.resize(8 + 4);
  frame[4] = 4;
  ASSERT_TRUE(send_raw(raw_.get(), frame));
  expect_refused("ipc channel: hello of 4 bytes, expected 12");

  for (const std::uint8_t role : {0, 3}) {
    frame = raw_frame(Hello{1, kProtocolVersion});
    frame[8 + 8] = role;
    ASSERT_TRUE(send_raw(raw_.get(), frame));
    expect_refused("ipc channel: hello role " + std::to_string(role) +
                   " is neither an Exporter (1) nor an Importer (2)");
  }

  frame = raw_frame(Release{1, false, {}});
  frame[8 + 8] = 2;  // has_event
  ASSERT_TRUE(send_raw(raw_.get(), frame));
  expect_refused("ipc channel: release has_event is 2 and refused 0, each must be 0 or 1");

  frame = raw_frame(Release{1, false, {}});
  frame[8 + 9] = 2;  // refused
  ASSERT_TRUE(send_raw(raw_.get(), frame));
  expect_refused("ipc channel: release has_event is 0 and refused 2, each must be 0 or 1");

  frame = raw_frame(Release{1, false, {}});
  frame[8 + 8] = 1;  // has_event, with refused
  frame[8 + 9] = 1;
  ASSERT_TRUE(send_raw(raw_.get(), frame));
  expect_refused("ipc channel: release is a refusal with an event");

  frame = raw_frame(Release{1, false, {}});
  frame[8 + 12] = 1;  // reserved
  ASSERT_TRUE(send_raw(raw_.get(), frame));
  expect_refused("ipc channel: release reserved bytes are not zero");

  frame = raw_frame(fake_publish());
  frame[8 + 8 + 4] = 2;  // descriptor version (after the frame header and forget_allocation)
  ASSERT_TRUE(send_raw(raw_.get(), frame));
  expect_refused("ipc descriptor: descriptor version 2, this build reads 1");

  // The channel still works after refusals.
  ASSERT_TRUE(send_raw(raw_.get(), raw_frame(Release{5, false, {}})));
  auto got = channel_->receive(1000);
  ASSERT_TRUE(got && *got);
  EXPECT_EQ(std::get<Release>(**got).export_id, 5u);
}

TEST_F(IpcChannel, StrayDescriptorsAreClosed) {
  make_raw_pair();
  UniqueFd a = memfd_with("a");
  UniqueFd b = memfd_with("b");
  const int open_before = test::open_fd_count();

  ASSERT_TRUE(send_raw(raw_.get(), raw_frame(Hello{1, kProtocolVersion}), {a.get(), b.get()}));
  expect_refused("ipc channel: hello with 2 file descriptors, expected 1 (the sender's pidfd)");
  EXPECT_EQ(test::open_fd_count(), open_before);
  EXPECT_EQ(channel_->refused_export(), std::nullopt);

  ASSERT_TRUE(send_raw(raw_.get(), raw_frame(Release{1, false, {}}), {a.get()}));
  expect_refused(
      "ipc channel: release of 80 bytes with 1 file descriptors, expected 80 bytes and none");
  EXPECT_EQ(test::open_fd_count(), open_before);

  // A refused publish whose descriptor decodes names its export, to be given back.
  ASSERT_TRUE(send_raw(raw_.get(), raw_frame(fake_publish()), {a.get()}));
  expect_refused(
      "ipc channel: publish of export 7 carries 1 file descriptors, its handle kind needs 0");
  EXPECT_EQ(test::open_fd_count(), open_before);
  EXPECT_EQ(channel_->refused_export(), 7u);

  TensorDescriptor d = sample_descriptor();
  d.handle_kind = MemoryHandleKind::kPosixFd;
  d.export_id = 8;
  Bytes posix = raw_frame(Publish{encoded(d), memfd_with("c"), 11});
  ASSERT_TRUE(send_raw(raw_.get(), posix, {a.get(), b.get()}));
  expect_refused(
      "ipc channel: publish of export 8 carries 2 file descriptors, its handle kind takes 0 or 1");
  EXPECT_EQ(test::open_fd_count(), open_before);
  EXPECT_EQ(channel_->refused_export(), 8u);
  // What it says of the importer's mappings holds all the same (see ImporterCore::refuse).
  EXPECT_EQ(channel_->refused_fd_allocation(), d.allocation_id);
  EXPECT_EQ(channel_->refused_forget_allocation(), 11u);

  ASSERT_TRUE(send_raw(raw_.get(), posix, {a.get(), b.get(), a.get(), b.get(), a.get(), b.get()}));
  expect_refused(
      "ipc channel: publish of export 8: frame carried more file descriptors than any frame may");
  EXPECT_EQ(test::open_fd_count(), open_before);
  EXPECT_EQ(channel_->refused_export(), 8u);

  ASSERT_TRUE(send_raw(raw_.get(), Bytes{}, {a.get()}));
  expect_refused("ipc channel: frame of 0 bytes is shorter than its 8-byte header");
  EXPECT_EQ(test::open_fd_count(), open_before);
  EXPECT_EQ(channel_->refused_export(), std::nullopt);

  ASSERT_TRUE(send_raw(raw_.get(), raw_frame(fake_publish()), {a.get()}));
  expect_refused(
      "ipc channel: publish of export 7 carries 1 file descriptors, its handle kind needs 0");
  ASSERT_TRUE(send_raw(raw_.get(), raw_frame(fake_publish())));
  auto accepted = channel_->receive(1000);
  ASSERT_TRUE(accepted && *accepted);
  EXPECT_EQ(channel_->refused_export(), std::nullopt) << "only the last receive counts";

  ASSERT_TRUE(send_raw(raw_.get(), raw_frame(fake_publish()), {a.get()}));
  expect_refused(
      "ipc channel: publish of export 7 carries 1 file descriptors, its handle kind needs 0");
  auto nothing = channel_->receive(0);
  ASSERT_TRUE(nothing.has_value() && !nothing->has_value());
  EXPECT_EQ(channel_->refused_export(), std::nullopt) << "a receive that read nothing";
}

// Out of memory once a Publish is read, it is consumed and named, so that its export can be given
// back: nothing escapes, and nothing is left to read.
TEST_F(IpcChannel, ReceiveOutOfMemoryConsumesAPublishAndNamesItsExport) {
  make_raw_pair();
  for (std::uint64_t skip = 0;; ++skip) {
    ASSERT_TRUE(send_raw(raw_.get(), raw_frame(fake_publish())));
    std::optional<expected<std::optional<Message>, Error>> got;
    bool threw = false;
    std::uint64_t failed = 0;
    {
      test::FailingAllocations failing(skip);
      try {
        got.emplace(channel_->receive(1000));
      } catch (...) {
        threw = true;
      }
      failed = failing.failed();
    }
    ASSERT_FALSE(threw) << "an exception escaped receive at allocation " << skip;
    if (!*got) {
      EXPECT_EQ(got->error().code, ErrorCode::kResourceExhausted) << got->error().message;
      EXPECT_EQ(channel_->refused_export(), 7u) << "allocation " << skip;
    } else {
      ASSERT_TRUE(got->value().has_value());
      EXPECT_TRUE(std::holds_alternative<Publish>(*got->value()));
    }
    got.reset();
    auto rest = channel_->receive(0);
    ASSERT_TRUE(rest.has_value()) << rest.error().message;
    EXPECT_FALSE(rest->has_value()) << "allocation " << skip << ": the frame was left unread";
    if (failed == 0) {
      break;
    }
  }
}

// A Release the channel refuses to send (a refusal with an event), out of memory for the
// refusal's message or its copy: an error, never an exception, and nothing is written.
TEST_F(IpcChannel, SendRefusalOutOfMemoryNeverThrows) {
  make_raw_pair();
  Release bad{7, true, {}};
  bad.refused = true;
  for (const std::uint64_t count : {std::uint64_t{1}, ~std::uint64_t{0}}) {
    for (std::uint64_t skip = 0;; ++skip) {
      std::optional<expected<void, Error>> sent;
      bool threw = false;
      std::uint64_t failed = 0;
      {
        test::FailingAllocations failing(skip, count);
        try {
          sent.emplace(channel_->send(bad, 0));
        } catch (...) {
          threw = true;
        }
        failed = failing.failed();
      }
      ASSERT_FALSE(threw) << "an exception escaped send at allocation " << skip;
      ASSERT_FALSE(sent->has_value()) << "allocation " << skip;
      EXPECT_TRUE(sent->error().code == ErrorCode::kInvalidArgument ||
                  sent->error().code == ErrorCode::kResourceExhausted)
          << sent->error().message;
      if (failed == 0) {
        break;
      }
    }
  }
}

// Releases 1 and 2, the channel open after each, then the end of file, twice alike.
void expect_releases_then_end_of_file(Channel& b) {
  for (std::uint64_t id : {1u, 2u}) {
    auto got = b.receive(1000);
    ASSERT_TRUE(got && *got) << (got ? "timeout" : got.error().message);
    EXPECT_EQ(std::get<Release>(**got).export_id, id);
    EXPECT_FALSE(b.closed());
  }
  for (int i = 0; i < 2; ++i) {
    auto got = b.receive(1000);
    ASSERT_FALSE(got.has_value());
    EXPECT_EQ(got.error().code, kChannelClosed);
    EXPECT_EQ(got.error().message, "ipc channel: peer hung up (end of file)");
    EXPECT_TRUE(b.closed());
  }
}

TEST_F(IpcChannel, EndOfFileComesAfterEveryQueuedMessage) {
  auto ends = Channel::pair();
  ASSERT_TRUE(ends.has_value());
  Channel b = std::move(ends->second);
  {
    Channel a = std::move(ends->first);
    ASSERT_TRUE(a.send(Release{1, false, {}}));
    ASSERT_TRUE(a.send(Release{2, false, {}}));
  }
  expect_releases_then_end_of_file(b);
}

// An end closed with records of its own unread makes the kernel report ECONNRESET once to the
// other end, ahead of what that end has still queued: the records come first all the same.
TEST_F(IpcChannel, AResetByAnEndWithUnreadRecordsComesAfterEveryQueuedMessage) {
  auto ends = Channel::pair();
  ASSERT_TRUE(ends.has_value());
  Channel b = std::move(ends->second);
  {
    Channel a = std::move(ends->first);
    ASSERT_TRUE(b.send(Release{9, false, {}}));  // never read by `a`
    ASSERT_TRUE(a.send(Release{1, false, {}}));
    ASSERT_TRUE(a.send(Release{2, false, {}}));
  }
  expect_releases_then_end_of_file(b);
}

// Empty records queued by a peer that then hung up read like its end of file (recvmsg returns 0
// for both): the records after them are still read first, since the end of file needs nothing left
// queued (FIONREAD counts every queued byte of a SEQPACKET socket, not only the next record's).
TEST_F(IpcChannel, RecordsAfterEmptyOnesOfAHungUpPeerAreStillRead) {
  make_raw_pair();
  ASSERT_TRUE(send_raw(raw_.get(), Bytes{}));
  ASSERT_TRUE(send_raw(raw_.get(), Bytes{}));
  ASSERT_TRUE(send_raw(raw_.get(), raw_frame(Release{5, false, {}})));
  raw_.reset();
  bool released = false;
  for (int i = 0; i < 4 && !released; ++i) {
    auto got = channel_->receive(1000);
    if (got && *got) {
      released = std::get<Release>(**got).export_id == 5;
      continue;
    }
    ASSERT_FALSE(got.has_value()) << "nothing came from a hung-up peer with a record queued";
    ASSERT_EQ(got.error().code, ErrorCode::kInvalidArgument) << got.error().message;
  }
  EXPECT_TRUE(released) << "the Release after the empty records was lost";
  auto end = channel_->receive(1000);
  ASSERT_FALSE(end.has_value());
  EXPECT_EQ(end.error().code, kChannelClosed) << end.error().message;
}

TEST_F(IpcChannel, SendToAClosedPeerNeitherRaisesSigpipeNorBlocks) {
  auto ends = Channel::pair();
  ASSERT_TRUE(ends.has_value());
  Channel a = std::move(ends->first);
  { Channel gone = std::move(ends->second); }
  auto sent = a.send(Hello{1, kProtocolVersion});  // SIGPIPE, if raised, would end the test run
  ASSERT_FALSE(sent.has_value());
  EXPECT_EQ(sent.error().code, kChannelClosed);
  EXPECT_EQ(sent.error().message, "ipc channel: peer hung up (send)");
  EXPECT_TRUE(a.closed());
}

TEST_F(IpcChannel, SendTimesOutWhenThePeerDoesNotRead) {
  auto ends = Channel::pair();
  ASSERT_TRUE(ends.has_value());
  bool timed_out = false;
  for (int i = 0; i < 1000000 && !timed_out; ++i) {
    auto sent = ends->first.send(Hello{1, kProtocolVersion}, 0);
    if (!sent) {
      EXPECT_EQ(sent.error().code, ErrorCode::kNotReady);
      EXPECT_EQ(sent.error().message, "ipc channel: send timed out, the peer is not reading");
      timed_out = true;
    }
  }
  EXPECT_TRUE(timed_out);
}

// An inherited socket comes without close-on-exec (it had to lose it to cross the exec): a process
// the adopter started later held the channel's end too, and its peer never saw the hang-up when
// the adopter went.
TEST_F(IpcChannel, AdoptMakesAnInheritedSocketCloseOnExec) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
  UniqueFd keep(sv[0]);
  ASSERT_EQ(::fcntl(sv[1], F_GETFD) & FD_CLOEXEC, 0);
  auto adopted = Channel::adopt(UniqueFd(sv[1]));
  ASSERT_TRUE(adopted.has_value()) << adopted.error().message;
  EXPECT_NE(::fcntl(adopted->fd(), F_GETFD) & FD_CLOEXEC, 0);
}

TEST_F(IpcChannel, AdoptRefusesOtherSockets) {
  int stream[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, stream), 0);
  UniqueFd keep(stream[1]);
  auto adopted = Channel::adopt(UniqueFd(stream[0]));
  ASSERT_FALSE(adopted.has_value());
  EXPECT_EQ(adopted.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(adopted.error().message,
            "ipc channel: adopt needs a connected AF_UNIX SOCK_SEQPACKET socket");
  EXPECT_FALSE(Channel::adopt(UniqueFd()).has_value());
}

// A SEQPACKET socket never connected, or one listening, was taken: its first send failed later as
// "peer hung up" (kClosed) and its receive as kFailure, not the refusal the header promises. One
// connected whose peer already left is still taken (it reports the hang-up when used).
TEST_F(IpcChannel, AdoptRefusesSocketsThatAreNotConnected) {
  const auto expect_refused = [](UniqueFd socket, const char* what) {
    auto adopted = Channel::adopt(std::move(socket));
    ASSERT_FALSE(adopted.has_value()) << what;
    EXPECT_EQ(adopted.error().code, ErrorCode::kInvalidArgument) << what;
    EXPECT_EQ(adopted.error().message,
              "ipc channel: adopt needs a connected AF_UNIX SOCK_SEQPACKET socket")
        << what;
  };
  UniqueFd fresh(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  ASSERT_TRUE(fresh.valid());
  expect_refused(std::move(fresh), "never connected");

  UniqueFd listening(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  ASSERT_TRUE(listening.valid());
  sockaddr_un address{};
  address.sun_family = AF_UNIX;  // an abstract name: nothing left in the file system
  const std::string name = "holoscan-adopt-" + std::to_string(::getpid());
  std::memcpy(address.sun_path + 1, name.data(), name.size());
  const auto address_length =
      static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  ASSERT_EQ(::bind(listening.get(), reinterpret_cast<const sockaddr*>(&address), address_length),
            0);
  ASSERT_EQ(::listen(listening.get(), 1), 0);
  expect_refused(std::move(listening), "listening");

  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair), 0);
  ::close(pair[1]);  // the peer left before the adoption
  auto adopted = Channel::adopt(UniqueFd(pair[0]));
  ASSERT_TRUE(adopted.has_value()) << adopted.error().message;
  auto received = adopted->receive(0);
  ASSERT_FALSE(received.has_value());
  EXPECT_EQ(received.error().code, ErrorCode::kClosed) << received.error().message;
}

class IpcListener : public IpcChannel {
 protected:
  void SetUp() override {
    IpcChannel::SetUp();
    char dir[] = "/tmp/holoscan-ipc-XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    dir_ = dir;
    path_ = dir_ + "/socket";
  }
  void TearDown() override {
    ::unlink(path_.c_str());
    ::rmdir(dir_.c_str());
    IpcChannel::TearDown();
  }

  std::string dir_;
  std::string path_;
};

TEST_F(IpcListener, ConnectsAndKnowsThePeer) {
  auto listener = Listener::listen(path_);
  ASSERT_TRUE(listener.has_value()) << listener.error().message;
  EXPECT_EQ(listener->path(), path_);
  auto client = Channel::connect(path_);
  ASSERT_TRUE(client.has_value()) << client.error().message;
  auto server = listener->accept(1000);
  ASSERT_TRUE(server && *server) << (server ? "timeout" : server.error().message);
  Channel& accepted = **server;

  auto pid = accepted.peer_pid();
  ASSERT_TRUE(pid.has_value()) << pid.error().message;
  EXPECT_EQ(*pid, ::getpid());
  ASSERT_TRUE(client->send(Hello{static_cast<std::uint32_t>(::getpid()), kProtocolVersion}));
  auto hello = accepted.receive(1000);
  ASSERT_TRUE(hello && *hello);
  EXPECT_TRUE(std::holds_alternative<Hello>(**hello));
}

TEST_F(IpcListener, AcceptTimesOutWithNoConnection) {
  auto listener = Listener::listen(path_);
  ASSERT_TRUE(listener.has_value());
  auto server = listener->accept(10);
  ASSERT_TRUE(server.has_value()) << server.error().message;
  EXPECT_FALSE(server->has_value());
}

// How long the next listen() of this binary waits before it listens (the test binary's own
// listen(), which every listen() of the library here calls): a stand-in for a listener preempted
// between naming its socket and listening on it.
std::atomic<int> g_listen_delay_ms{0};
// The errno the next listen() of this binary fails with (0: it listens).
std::atomic<int> g_listen_errno{0};
// The backlog the next listen() of this binary asks for in place of the caller's (-1: the
// caller's).
std::atomic<int> g_listen_backlog{-1};

}  // namespace
}  // namespace holoscan::ipc

extern "C" int listen(int fd, int backlog) {
  if (const int ms = holoscan::ipc::g_listen_delay_ms.exchange(0); ms > 0) {
    ::usleep(static_cast<useconds_t>(ms) * 1000);
  }
  if (const int err = holoscan::ipc::g_listen_errno.exchange(0); err != 0) {
    errno = err;
    return -1;
  }
  const int replaced = holoscan::ipc::g_listen_backlog.exchange(-1);
  return static_cast<int>(::syscall(SYS_listen, fd, replaced >= 0 ? replaced : backlog));
}

namespace holoscan::ipc {
namespace {

// A peer started beside the listener waits for its path to appear, then connects: the path must
// never name a socket that is not listening yet (bound to it directly, it did between bind() and
// listen(), and the peer's connect() was refused: seen under load as a consumer that gave up while
// its producer waited in accept() for ever). The staging name leaves nothing behind.
TEST_F(IpcListener, APeerThatFindsThePathIsNeverRefused) {
  for (int round = 0; round < 5; ++round) {
    std::atomic<bool> go{false};
    expected<Channel, Error> peer = make_unexpected(ErrorCode::kFailure, "never connected");
    std::thread peer_thread([&] {
      go.store(true);
      while (::access(path_.c_str(), F_OK) != 0) {
      }
      peer = Channel::connect(path_);
    });
    while (!go.load()) {
    }
    g_listen_delay_ms.store(20);
    auto listener = Listener::listen(path_);
    ASSERT_TRUE(listener.has_value()) << listener.error().message;
    peer_thread.join();
    ASSERT_TRUE(peer.has_value()) << "round " << round << ": " << peer.error().message;
  }
  DIR* folder = ::opendir(dir_.c_str());
  ASSERT_NE(folder, nullptr);
  int entries = 0;
  while (const dirent* entry = ::readdir(folder)) {
    entries += std::string(entry->d_name) == "." || std::string(entry->d_name) == ".." ? 0 : 1;
  }
  ::closedir(folder);
  EXPECT_EQ(entries, 0) << "a listener's path or staging name outlived it";
}

// A listen() that fails is reported as listen()'s, and leaves no path behind: through the staging
// name, and bound to the path itself where the staging name would be too long for an address.
// A listener that does not accept, its backlog full: connect() without a limit would wait for it
// for ever; with one it gives up with kTimeout, and connects once the listener takes one.
TEST_F(IpcListener, ConnectToAFullBacklogTimesOutThenConnectsOnceThereIsRoom) {
  g_listen_backlog.store(0);
  auto listener = Listener::listen(path_);
  ASSERT_TRUE(listener.has_value()) << listener.error().message;
  std::vector<Channel> waiting;  // fill the backlog: a connect past it says kTimeout at once
  for (int i = 0; i < 8; ++i) {
    auto filler = Channel::connect(path_, 0);
    if (!filler) {
      ASSERT_EQ(filler.error().code, ErrorCode::kTimeout) << filler.error().message;
      break;
    }
    waiting.push_back(std::move(*filler));
  }
  ASSERT_FALSE(waiting.empty());
  ASSERT_LT(waiting.size(), 8u) << "the backlog never filled";

  const auto started = std::chrono::steady_clock::now();
  auto refused = Channel::connect(path_, 150);
  const auto spent = std::chrono::steady_clock::now() - started;
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, ErrorCode::kTimeout);
  EXPECT_EQ(refused.error().message,
            "ipc channel: connect to " + path_ + ": the listener's backlog stayed full for 150 ms");
  EXPECT_GE(spent, std::chrono::milliseconds(150));
  EXPECT_LT(spent, std::chrono::seconds(5));

  auto taken = listener->accept(1000);
  ASSERT_TRUE(taken && *taken) << (taken ? "nothing to accept" : taken.error().message);
  auto client = Channel::connect(path_, 1000);
  ASSERT_TRUE(client.has_value()) << client.error().message;
  // A Channel's socket is blocking, whichever way it connected.
  EXPECT_EQ(::fcntl(client->fd(), F_GETFL) & O_NONBLOCK, 0);
  auto server = listener->accept(1000);
  ASSERT_TRUE(server && *server) << (server ? "nothing to accept" : server.error().message);
  ASSERT_TRUE(client->send(Hello{static_cast<std::uint32_t>(::getpid()), kProtocolVersion}));
}

// A connect without a limit waits while the backlog is full. A signal whose handler does not ask
// for restarts ends that wait with nothing under way (a Unix socket connects at once or not at
// all): the connect goes on waiting, and the Channel it gives is connected, never a socket that
// only fails at its first send.
TEST_F(IpcListener, ASignalDuringAWaitForTheBacklogLeavesTheConnectWaiting) {
  g_listen_backlog.store(0);
  auto listener = Listener::listen(path_);
  ASSERT_TRUE(listener.has_value()) << listener.error().message;
  std::vector<Channel> waiting;
  for (int i = 0; i < 8; ++i) {
    auto filler = Channel::connect(path_, 0);
    if (!filler) {
      break;
    }
    waiting.push_back(std::move(*filler));
  }
  ASSERT_LT(waiting.size(), 8u) << "the backlog never filled";

  static std::atomic<bool> interrupted{false};
  interrupted = false;
  struct sigaction interrupting = {};
  interrupting.sa_handler = [](int) { interrupted = true; };
  interrupting.sa_flags = 0;  // no SA_RESTART: a blocked connect() returns EINTR
  struct sigaction previous = {};
  ASSERT_EQ(::sigaction(SIGUSR1, &interrupting, &previous), 0);
  const pthread_t connecting = ::pthread_self();
  std::thread room([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    (void)::pthread_kill(connecting, SIGUSR1);  // interrupts the waiting connect
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    auto taken = listener->accept(1000);  // then room for one more
    (void)taken;
  });
  auto client = Channel::connect(path_);
  room.join();
  ::sigaction(SIGUSR1, &previous, nullptr);
  EXPECT_TRUE(interrupted.load()) << "the signal came";
  ASSERT_TRUE(client.has_value()) << client.error().message;
  sockaddr_un peer = {};
  socklen_t length = sizeof(peer);
  EXPECT_EQ(::getpeername(client->fd(), reinterpret_cast<sockaddr*>(&peer), &length), 0)
      << "the Channel is not connected: " << std::strerror(errno);
  EXPECT_TRUE(client->send(Hello{static_cast<std::uint32_t>(::getpid()), kProtocolVersion}));
}

TEST_F(IpcListener, AListenThatFailsIsReportedAsListenAndLeavesNoPath) {
  const std::string long_path = dir_ + "/" + std::string(100 - dir_.size(), 'l');  // 100 bytes
  for (const std::string& path : {path_, long_path}) {
    g_listen_errno.store(EOPNOTSUPP);
    auto listener = Listener::listen(path);
    ASSERT_FALSE(listener.has_value()) << path;
    EXPECT_EQ(listener.error().code, ErrorCode::kFailure);
    EXPECT_EQ(listener.error().message.rfind("ipc listener: listen failed: ", 0), 0u)
        << listener.error().message;
    EXPECT_NE(::access(path.c_str(), F_OK), 0) << "a path no listener listens on was left";
    ::unlink(path.c_str());
  }
  auto listener = Listener::listen(long_path);  // the fallback listens when listen() does
  ASSERT_TRUE(listener.has_value()) << listener.error().message;
}

TEST_F(IpcListener, RemovesItsPathAndRefusesATakenOne) {
  {
    auto listener = Listener::listen(path_);
    ASSERT_TRUE(listener.has_value());
    EXPECT_EQ(::access(path_.c_str(), F_OK), 0);
    auto again = Listener::listen(path_);
    ASSERT_FALSE(again.has_value());
    EXPECT_EQ(again.error().code, ErrorCode::kFailure);
    EXPECT_NE(again.error().message.find("Address already in use"), std::string::npos)
        << again.error().message;
    Listener moved = std::move(*listener);
    EXPECT_EQ(moved.path(), path_);
  }
  EXPECT_NE(::access(path_.c_str(), F_OK), 0) << "the path outlived its listener";
  auto refused = Channel::connect(path_);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, ErrorCode::kFailure);
}

// A listener closed while another thread waited in its accept() (Python's close(), whose call on
// another thread keeps the object) went on listening until that wait ended: connects still
// succeeded, the path stayed, and listening there again was EADDRINUSE. stop() ends it at once.
TEST_F(IpcListener, StopFromAnotherThreadEndsAWaitingAcceptAndFreesThePath) {
  auto listener = Listener::listen(path_);
  ASSERT_TRUE(listener.has_value()) << listener.error().message;
  std::optional<expected<std::optional<Channel>, Error>> accepted;
  std::thread waiter([&] { accepted.emplace(listener->accept(10000)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  listener->stop();
  waiter.join();
  ASSERT_TRUE(accepted.has_value());
  ASSERT_FALSE(accepted->has_value()) << "accept() returned a connection or timed out (10 s)";
  EXPECT_EQ(accepted->error().code, ErrorCode::kClosed);
  EXPECT_EQ(accepted->error().message, "ipc listener: stopped");
  EXPECT_NE(::access(path_.c_str(), F_OK), 0) << "the path outlived stop()";
  auto refused = Channel::connect(path_, 0);
  EXPECT_FALSE(refused.has_value()) << "a connect reached a stopped listener";
  auto again = Listener::listen(path_);
  ASSERT_TRUE(again.has_value()) << again.error().message;
  auto late = listener->accept(0);
  ASSERT_FALSE(late.has_value());
  EXPECT_EQ(late.error().code, ErrorCode::kClosed);
}

// A listener whose path was removed and bound again by a second listener (the usual "remove a
// stale socket, then listen" start) removed the second one's path when it went: nobody could
// connect to the second any more.
TEST_F(IpcListener, ALateListenerNeverRemovesTheNextOnesPath) {
  auto first = Listener::listen(path_);
  ASSERT_TRUE(first.has_value()) << first.error().message;
  ASSERT_EQ(::unlink(path_.c_str()), 0);
  auto second = Listener::listen(path_);
  ASSERT_TRUE(second.has_value()) << second.error().message;
  first = Listener::listen(dir_ + "/other");  // the first one goes (its path is not its own)
  ASSERT_TRUE(first.has_value()) << first.error().message;
  EXPECT_EQ(::access(path_.c_str(), F_OK), 0) << "the first listener removed the second's path";
  auto client = Channel::connect(path_, 1000);
  ASSERT_TRUE(client.has_value()) << client.error().message;
  auto server = second->accept(1000);
  EXPECT_TRUE(server && *server);
  ::unlink((dir_ + "/other").c_str());
}

// A forked child that stopped its copy of a listener (Python's close() in a child) shut the
// socket it shares with the parent down: the parent's connects were refused and its accept()
// failed for good.
TEST_F(IpcListener, AChildsStopLeavesTheParentListening) {
  auto listener = Listener::listen(path_);
  ASSERT_TRUE(listener.has_value()) << listener.error().message;
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    listener->stop();
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_EQ(::access(path_.c_str(), F_OK), 0) << "the child removed the parent's path";
  auto client = Channel::connect(path_, 1000);
  ASSERT_TRUE(client.has_value()) << client.error().message;
  auto server = listener->accept(1000);
  ASSERT_TRUE(server.has_value()) << server.error().message;
  EXPECT_TRUE(server->has_value());
}

TEST_F(IpcListener, RefusesUnusablePaths) {
  const std::string too_long(200, 'x');
  auto listener = Listener::listen(too_long);
  ASSERT_FALSE(listener.has_value());
  EXPECT_EQ(listener.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(listener.error().message,
            "ipc listener: socket path \"" + too_long + "\" must be 1 to 107 bytes without NUL");
  auto client = Channel::connect("");
  ASSERT_FALSE(client.has_value());
  EXPECT_EQ(client.error().code, ErrorCode::kInvalidArgument);
  auto with_nul = Channel::connect(std::string("a\0b", 3));
  ASSERT_FALSE(with_nul.has_value());
  EXPECT_EQ(with_nul.error().code, ErrorCode::kInvalidArgument);
  // The NUL written out, so that the message does not end there when read as a C string.
  EXPECT_EQ(std::string(with_nul.error().message.c_str()), with_nul.error().message);
  EXPECT_NE(with_nul.error().message.find("socket path \"a\\0b\" must be 1 to 107 bytes"),
            std::string::npos)
      << with_nul.error().message;
}

// A Hello proves its sender: its pidfd must name the live process whose credentials the kernel
// attached to it (SCM_CREDENTIALS). Anything else is refused, and its descriptor closed.
class IpcHelloProof : public IpcChannel {
 protected:
  void SetUp() override {
    IpcChannel::SetUp();
    make_raw_pair();
    hello_ = raw_frame(Hello{static_cast<std::uint32_t>(::getpid()), kProtocolVersion});
  }
  void TearDown() override {
    if (child_ > 0) {
      ::kill(child_, SIGKILL);
      EXPECT_EQ(::waitpid(child_, nullptr, 0), child_);
    }
    IpcChannel::TearDown();
  }

  // A pidfd of a child that runs until the test ends, or (`exited`) that has exited and been
  // reaped: then the pidfd names no live process, whatever reuses its pid.
  UniqueFd pidfd_of_child(bool exited) {
    const pid_t child = ::fork();
    if (child == 0) {
      if (!exited) {
        ::pause();
      }
      ::_exit(0);
    }
    UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, child, 0)));
    EXPECT_TRUE(pidfd.valid());
    if (exited) {
      EXPECT_EQ(::waitpid(child, nullptr, 0), child);
    } else {
      child_ = child;
    }
    return pidfd;
  }

  Bytes hello_;
  pid_t child_ = -1;
};

TEST_F(IpcHelloProof, HelloCarriesTheSendersOwnPidfd) {
  auto ends = Channel::pair();
  ASSERT_TRUE(ends.has_value());
  ASSERT_TRUE(
      ends->first.send(Hello{1234, kProtocolVersion}));  // the pid it claims is its own view
  auto got = ends->second.receive(1000);
  ASSERT_TRUE(got && *got) << (got ? "timeout" : got.error().message);
  const Hello& hello = std::get<Hello>(**got);
  EXPECT_EQ(hello.pid, 1234u);
  ASSERT_TRUE(hello.process.valid());
  EXPECT_TRUE(detail::check_sender(hello.process, ::getpid()).has_value());
}

// A pidfd whose description cannot be read (here: a number no descriptor has; in practice a
// process out of descriptors for /proc/self/fdinfo) is unproven: refused as a denial, which an
// exporter survives, not as a failure of the socket, which ended a live peer's connection.
TEST_F(IpcHelloProof, AHelloWhoseProofCannotBeCheckedIsDenied) {
  const UniqueFd unreadable(1 << 20);  // above any descriptor limit: never open
  auto proven = detail::check_sender(unreadable, ::getpid());
  ASSERT_FALSE(proven.has_value());
  EXPECT_EQ(proven.error().code, ErrorCode::kPermissionDenied) << proven.error().message;
  EXPECT_NE(proven.error().message.find("its pidfd could not be checked: "), std::string::npos)
      << proven.error().message;
}

TEST_F(IpcHelloProof, HelloWithoutItsPidfdIsRefused) {
  ASSERT_TRUE(send_raw(raw_.get(), hello_));
  expect_refused("ipc channel: hello with 0 file descriptors, expected 1 (the sender's pidfd)");
}

TEST_F(IpcHelloProof, HelloWithAnotherProcessesPidfdIsRefused) {
  UniqueFd other = pidfd_of_child(/*exited=*/false);
  ASSERT_TRUE(send_raw(raw_.get(), hello_, {other.get()}));
  other.reset();
  const int open_before = test::open_fd_count();
  expect_refused("ipc channel: the Hello's pidfd names process " + std::to_string(child_) +
                     ", not its sender (pid " + std::to_string(::getpid()) +
                     ", as the kernel says)",
                 ErrorCode::kPermissionDenied);
  EXPECT_EQ(test::open_fd_count(), open_before) << "the refused pidfd was kept";
}

TEST_F(IpcHelloProof, HelloWithTheRightPidButAnExitedProcessesPidfdIsRefused) {
  UniqueFd gone = pidfd_of_child(/*exited=*/true);
  ASSERT_TRUE(send_raw(raw_.get(), hello_, {gone.get()}));
  expect_refused("ipc channel: the Hello's pidfd names no live process, not its sender (pid " +
                     std::to_string(::getpid()) + ", as the kernel says)",
                 ErrorCode::kPermissionDenied);
}

TEST_F(IpcHelloProof, HelloWithAnotherDescriptorIsRefused) {
  UniqueFd file = memfd_with("not a process");
  ASSERT_TRUE(send_raw(raw_.get(), hello_, {file.get()}));
  expect_refused("ipc channel: the Hello's descriptor is not a pidfd",
                 ErrorCode::kPermissionDenied);
}

}  // namespace
}  // namespace holoscan::ipc
