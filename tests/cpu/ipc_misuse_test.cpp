// The cross-process API used after a move: a Channel, a Listener, an Exporter and an Importer
// whose state went to another object. Each call must return (an error, or nothing to report)
// rather than wait for good on no socket or read through no state.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "holoscan/ipc.hpp"
#include "support/fake_cuda_ipc.hpp"
#include "support/gtest_printers.hpp"
#include "support/ipc_peers.hpp"
#include "support/ipc_raw_socket.hpp"

namespace holoscan::ipc {
namespace {

using Clock = std::chrono::steady_clock;

// Runs `call` on a thread of its own and says whether it returned within `limit`; a call that
// never returns is left to the process's exit (the thread is detached).
template <class Call>
bool returns_within(std::chrono::milliseconds limit, Call call) {
  auto done = std::make_shared<std::atomic<bool>>(false);
  std::thread([done, call]() mutable {
    call();
    done->store(true);
  }).detach();
  const auto until = Clock::now() + limit;
  while (!done->load() && Clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return done->load();
}

// A Channel or a Listener moved from has no socket: poll() ignores a negative descriptor, so a
// wait without a limit never ended (and one with a limit reported "nothing came"). Each is an
// error now, at once.
TEST(IpcMisuse, AMovedFromChannelOrListenerRefusesToWaitOnNoSocket) {
  const int fds_before = test::open_fd_count();
  {
    auto pair = Channel::pair();
    ASSERT_TRUE(pair) << pair.error().message;
    Channel taken = std::move(pair->first);
    auto* moved_from = &pair->first;
    ASSERT_EQ(moved_from->fd(), -1);
    std::optional<expected<std::optional<Message>, Error>> received;
    EXPECT_TRUE(returns_within(std::chrono::seconds(2), [&] {
      received = moved_from->receive(-1);
    })) << "receive(-1) on a moved-from Channel never returned";
    if (received) {
      ASSERT_FALSE(*received) << "a moved-from Channel reported a message or nothing";
      EXPECT_EQ(received->error().code, ErrorCode::kInvalidArgument) << received->error().message;
    }
    auto timed = moved_from->receive(50);
    EXPECT_FALSE(timed) << "a moved-from Channel reported a timeout as if it had a socket";
    if (!timed) {
      EXPECT_EQ(timed.error().code, ErrorCode::kInvalidArgument) << timed.error().message;
    }
    auto sent = moved_from->send(Release{}, -1);
    EXPECT_FALSE(sent);
    if (!sent) {
      EXPECT_EQ(sent.error().code, ErrorCode::kInvalidArgument) << sent.error().message;
    }
    // Its peer's pid and liveness say so too, as send() and receive() do (not EBADF's kFailure).
    auto pid = moved_from->peer_pid();
    ASSERT_FALSE(pid);
    EXPECT_EQ(pid.error().code, ErrorCode::kInvalidArgument) << pid.error().message;
    auto watched = watch_peer(*moved_from);
    ASSERT_FALSE(watched);
    EXPECT_EQ(watched.error().code, ErrorCode::kInvalidArgument) << watched.error().message;

    const std::string path = "/tmp/holoscan-ipc-misuse-" + std::to_string(::getpid());
    auto listener = Listener::listen(path);
    ASSERT_TRUE(listener) << listener.error().message;
    Listener kept = std::move(*listener);
    std::optional<expected<std::optional<Channel>, Error>> accepted;
    EXPECT_TRUE(returns_within(std::chrono::seconds(2), [&] { accepted = listener->accept(-1); }))
        << "accept(-1) on a moved-from Listener never returned";
    if (accepted) {
      ASSERT_FALSE(*accepted);
      EXPECT_EQ(accepted->error().code, ErrorCode::kInvalidArgument) << accepted->error().message;
    }
  }
  EXPECT_EQ(test::open_fd_count(), fds_before) << "descriptor leak";
}

// An Exporter or an Importer moved from kept a null state, and every call read through it (a
// crash). They fail with kInvalidArgument now; the accessors report nothing held.
TEST(IpcMisuse, AMovedFromExporterOrImporterRefusesEveryCall) {
  test::FakeCudaIpcScope scope;
  auto link = test::local_link(2);
  ASSERT_TRUE(link.ok());
  Exporter exporter = std::move(*link.exporter);
  Importer importer = std::move(*link.importer);
  Exporter& old_exporter = *link.exporter;
  Importer& old_importer = *link.importer;
  Tensor tensor = test::allocate(*link.pool, {4});

  auto published = old_exporter.publish(link.peer, tensor);
  ASSERT_FALSE(published);
  EXPECT_EQ(published.error().code, ErrorCode::kInvalidArgument) << published.error().message;
  auto polled = old_exporter.poll();
  ASSERT_FALSE(polled);
  EXPECT_EQ(polled.error().code, ErrorCode::kInvalidArgument);
  auto pair = Channel::pair();
  ASSERT_TRUE(pair);
  auto added = old_exporter.add_peer(std::move(pair->first), 0);
  ASSERT_FALSE(added);
  EXPECT_EQ(added.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(old_exporter.fd(), -1);
  EXPECT_EQ(old_exporter.held(), 0u);
  EXPECT_EQ(old_exporter.held(link.peer), 0u);
  EXPECT_FALSE(old_exporter.connected(link.peer));
  EXPECT_EQ(old_exporter.stats().published, 0u);

  auto received = old_importer.receive(-1);
  ASSERT_FALSE(received);
  EXPECT_EQ(received.error().code, ErrorCode::kInvalidArgument) << received.error().message;
  auto flushed = old_importer.poll();
  ASSERT_FALSE(flushed);
  EXPECT_EQ(flushed.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(old_importer.fd(), -1);
  EXPECT_EQ(old_importer.outstanding(), 0u);
  EXPECT_EQ(old_importer.queued_releases(), 0u);
  EXPECT_EQ(old_importer.cached_mappings(), 0u);
  EXPECT_EQ(old_importer.stats().imported, 0u);
  TensorDescriptor descriptor;
  auto imported = import_tensor(descriptor, UniqueFd(), old_importer);
  ASSERT_FALSE(imported);
  EXPECT_EQ(imported.error().code, ErrorCode::kInvalidArgument) << imported.error().message;

  // The objects that took the state work as before.
  auto id = exporter.publish(link.peer, tensor);
  ASSERT_TRUE(id) << id.error().message;
  Tensor got = test::receive_one(importer);
  EXPECT_TRUE(got);
  got = Tensor();
  EXPECT_TRUE(test::poll_until(exporter, [&] { return exporter.held() == 0; }));
}

// An ExportedTensor moved from: its accessors read through the state that went to the other
// object (a segmentation fault). They describe nothing now.
TEST(IpcMisuse, AMovedFromExportedTensorDescribesNothing) {
  test::FakeCudaIpcScope scope;
  auto pool = test::make_device_pool(1024, 1, test::PoolKind::kShareable);
  ASSERT_NE(pool, nullptr);
  Tensor tensor = test::allocate(*pool, {8});
  auto exported = export_tensor(tensor, 1);
  ASSERT_TRUE(exported) << exported.error().message;
  const int fd = exported->fd();
  ExportedTensor taken = std::move(*exported);
  EXPECT_EQ(exported->fd(), -1);
  EXPECT_EQ(exported->device(), -1);
  EXPECT_EQ(exported->descriptor().export_id, 0u);
  EXPECT_TRUE(exported->descriptor().shape.empty());
  EXPECT_EQ(taken.fd(), fd);
  EXPECT_EQ(taken.descriptor().export_id, 1u);
}

// An exporter's end that sends frames other than Publish without end (Releases, here): receive()
// read and refused them one after another while any was queued, past its time limit, for as long
// as the peer kept sending. It returns by its limit now, with nothing.
TEST(IpcMisuse, ReceiveKeepsItsTimeLimitWhileThePeerSendsOnlyOtherFrames) {
  test::FakeCudaIpcScope scope;
  auto link = test::raw_exporter_link();
  ASSERT_TRUE(link.raw && link.importer);
  // The peer sends for 3 s whatever receive() does (before the fix it returned only when the
  // queue ran dry for a moment, at the flood's end).
  std::atomic<bool> stop{false};
  const auto flood_until = Clock::now() + std::chrono::milliseconds(3000);
  std::vector<std::thread> flooders;
  for (int i = 0; i < 2; ++i) {
    flooders.emplace_back([&] {
      while (!stop.load() && Clock::now() < flood_until) {
        (void)link.raw->send(Release{1, false, {}}, 10);
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // frames queued before the call
  const auto start = Clock::now();
  auto received = link.importer->receive(100);
  const auto took = Clock::now() - start;
  stop.store(true);
  for (auto& flooder : flooders) {
    flooder.join();
  }
  ASSERT_TRUE(received) << received.error().message;
  EXPECT_FALSE(*received) << "a tensor came from a peer that sent none";
  // Room for a loaded machine (two flooders on two cores) short of the flood's 3 s.
  EXPECT_LT(took, std::chrono::milliseconds(1200))
      << "receive(100) took " << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
      << " ms";
}

// A view written by hand into a pool tensor's context (the members are public) that no import
// would make: export_tensor() copied its extents into the descriptor before any check, so
// dimensions without a shape read through a null pointer (a crash) and a negative ndim made a
// vector of a negative length (std::length_error out of publish()). Each is refused now, before
// anything is taken, and the link stays usable.
TEST(IpcMisuse, AViewWrittenByHandThatNoImportWouldMakeIsRefused) {
  test::FakeCudaIpcScope scope;
  auto link = test::local_link(2);
  ASSERT_TRUE(link.ok());
  Tensor tensor = test::allocate(*link.pool, {4});
  DLTensor& view = tensor.dl_ctx()->tensor.dl_tensor;
  const DLTensor kept = view;
  const std::vector<std::int64_t> ones(40, 1);
  struct Case {
    const char* what;
    std::int32_t ndim;
    const std::int64_t* shape;
    const char* message;
  };
  const Case cases[] = {
      {"2 dimensions and no shape", 2, nullptr,
       "ipc export: the tensor has 2 dimensions and no shape"},
      {"a negative ndim", -1, ones.data(), "ipc export: ndim -1 is outside [0, 32]"},
      {"40 dimensions", 40, ones.data(), "ipc export: ndim 40 is outside [0, 32]"},
  };
  for (const Case& c : cases) {
    view.ndim = c.ndim;
    view.shape = const_cast<std::int64_t*>(c.shape);
    view.strides = nullptr;
    auto exported = export_tensor(tensor, 1);
    ASSERT_FALSE(exported) << c.what;
    EXPECT_EQ(exported.error().code, ErrorCode::kInvalidArgument) << c.what;
    EXPECT_EQ(exported.error().message, c.message) << c.what;
    auto published = link.exporter->publish(link.peer, tensor);
    ASSERT_FALSE(published) << c.what;
    EXPECT_EQ(published.error().code, ErrorCode::kInvalidArgument) << c.what;
    EXPECT_EQ(link.exporter->held(), 0u) << c.what;
  }
  view = kept;
  auto id = link.exporter->publish(link.peer, tensor);
  ASSERT_TRUE(id) << id.error().message;
  Tensor got = test::receive_one(*link.importer);
  EXPECT_TRUE(got);
  got = Tensor();
  EXPECT_TRUE(test::poll_until(*link.exporter, [&] { return link.exporter->held() == 0; }));
}

// add_peer's kIncompatible means another protocol version (or a peer that is an Exporter too:
// TwoExportersOrTwoImportersRefuseEachOther), for which a retry cannot help; a Hello that is
// malformed otherwise is kInvalidArgument (every channel refusal of the Hello was
// kIncompatible: a Hello without its pidfd, a pid of 0, descriptors the kernel could not pass).
TEST(IpcMisuse, AddPeerIsIncompatibleOnlyForAnotherProtocolVersion) {
  test::FakeCudaIpcScope scope;
  auto exporter = Exporter::create();
  ASSERT_TRUE(exporter.has_value()) << exporter.error().message;
  const struct {
    std::uint32_t pid;  // 0 is written into the frame: the channel never sends such a Hello
    std::uint32_t version;
    ErrorCode code;
    const char* says;
  } cases[] = {
      {1, 2, ErrorCode::kIncompatible, "peer speaks protocol version 2"},
      {0, kProtocolVersion, ErrorCode::kInvalidArgument, "hello pid is 0"},
      {1, kProtocolVersion, ErrorCode::kInvalidArgument, "hello with 0 file descriptors"},
  };
  for (const auto& each : cases) {
    auto ends = Channel::pair();
    ASSERT_TRUE(ends.has_value()) << ends.error().message;
    std::vector<std::uint8_t> frame = test::raw_frame(Message{Hello{1, each.version, UniqueFd()}});
    ASSERT_GE(frame.size(), 12u);
    if (each.pid == 0) {
      std::fill(frame.begin() + 8, frame.begin() + 12, std::uint8_t{0});  // the payload's pid
    }
    ASSERT_TRUE(test::send_raw(ends->second.fd(), frame, {}));
    auto added = exporter->add_peer(std::move(ends->first), 1000);
    ASSERT_FALSE(added.has_value()) << each.says;
    EXPECT_EQ(added.error().code, each.code) << added.error().message;
    EXPECT_NE(added.error().message.find(each.says), std::string::npos) << added.error().message;
  }
}

// Two Exporters on one channel each took the other's Publish for a refused message and never
// released it: every publish held its claim (and its pool block) until the process exited. Two
// Importers each waited for a Publish for good. Both ends now refuse the peer, kIncompatible.
TEST(IpcMisuse, TwoExportersOrTwoImportersRefuseEachOther) {
  test::FakeCudaIpcScope scope;
  const int fds_before = test::open_fd_count();
  {
    auto first = Exporter::create();
    auto second = Exporter::create();
    ASSERT_TRUE(first.has_value() && second.has_value());
    auto ends = Channel::pair();
    ASSERT_TRUE(ends.has_value()) << ends.error().message;
    expected<PeerId, Error> other = make_unexpected(ErrorCode::kFailure, "not run");
    std::thread thread([&] { other = second->add_peer(std::move(ends->second), 5000); });
    auto added = first->add_peer(std::move(ends->first), 5000);
    thread.join();
    for (const auto* result : {&added, &other}) {
      ASSERT_FALSE(result->has_value());
      EXPECT_EQ(result->error().code, ErrorCode::kIncompatible) << result->error().message;
      EXPECT_EQ(result->error().message,
                "ipc exporter: the peer is an Exporter too; the peer of an Exporter must be an "
                "Importer");
    }
    EXPECT_EQ(first->held(), 0u);
    EXPECT_EQ(second->held(), 0u);
  }
  {
    auto ends = Channel::pair();
    ASSERT_TRUE(ends.has_value()) << ends.error().message;
    expected<Importer, Error> other = make_unexpected(ErrorCode::kFailure, "not run");
    std::thread thread([&] { other = Importer::create(std::move(ends->second), 5000); });
    auto created = Importer::create(std::move(ends->first), 5000);
    thread.join();
    for (const auto* result : {&created, &other}) {
      ASSERT_FALSE(result->has_value());
      EXPECT_EQ(result->error().code, ErrorCode::kIncompatible) << result->error().message;
      EXPECT_EQ(result->error().message,
                "ipc importer: the peer is an Importer too; the peer of an Importer must be an "
                "Exporter");
    }
  }
  EXPECT_EQ(test::open_fd_count(), fds_before);
}

}  // namespace
}  // namespace holoscan::ipc
