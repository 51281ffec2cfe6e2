// Covers protocol version 3's fd passing: a pool allocation's fd crosses a peer connection with
// its first Publish only (counted at the socket: what a bare channel end receives), every
// connection starts over, a refusal makes the next Publish carry it again, the 64 allocations an
// exporter remembers per peer are bounded by naming the one forgotten, and a Publish without fd of
// an allocation the importer has not mapped is refused per tensor. Every claim comes back.
#include <fcntl.h>
#include <gtest/gtest.h>

#include <cuda.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include "holoscan/ipc.hpp"
#include "holoscan/tensor_pool.hpp"
#include "ipc/export/ipc_sent_fds.hpp"
#include "ipc/transport/ipc_handshake.hpp"
#include "support/fake_cuda_ipc.hpp"
#include "support/gtest_printers.hpp"
#include "support/ipc_peers.hpp"
#include "support/ipc_raw_socket.hpp"

namespace holoscan::ipc {
namespace {

using test::CudaIpcEntry;

// What a bare importer end read of one Publish.
struct Seen {
  std::uint64_t export_id = 0;
  std::uint64_t allocation_id = 0;
  bool fd = false;  // whether a descriptor crossed the socket with it
  std::uint64_t forget = 0;
};

// A tensor of 256 floats (one 1 KiB block) of `pool`, holding `value` everywhere.
Tensor filled(TensorPool& pool, float value) {
  Tensor tensor = test::allocate(pool, {256});
  auto* data = static_cast<float*>(tensor.data());
  std::fill(data, data + 256, value);
  return tensor;
}

// How many of the 256 floats of `tensor` differ from `value`.
std::ptrdiff_t differing(const Tensor& tensor, float value) {
  const auto* data = static_cast<const float*>(tensor.data());
  return std::count_if(data, data + 256, [&](float x) { return x != value; });
}

class IpcFdOnce : public ::testing::Test {
 protected:
  void SetUp() override {
    fds_before_ = test::open_fd_count();
    auto exporter = Exporter::create();
    ASSERT_TRUE(exporter.has_value()) << exporter.error().message;
    exporter_.emplace(std::move(*exporter));
    pool_ = test::make_device_pool(1024, 4, test::PoolKind::kShareable);
    ASSERT_NE(pool_, nullptr);
  }
  void TearDown() override {
    for (auto& [peer, channel] : raw_) {
      static_cast<void>(peer);
      release_all(channel);
    }
    importers_.clear();
    EXPECT_TRUE(test::poll_until(*exporter_, [&] { return exporter_->held() == 0; }))
        << exporter_->held() << " claim(s) never came back";
    raw_.clear();
    exporter_.reset();
    pools_.clear();
    pool_.reset();
    scope_.reset();
    EXPECT_EQ(test::open_fd_count(), fds_before_) << "descriptor leak";
  }

  // A peer whose importer end is a bare channel that the test reads; returns its index in raw_.
  std::size_t raw_peer() {
    auto ends = Channel::pair();
    EXPECT_TRUE(ends.has_value());
    expected<Hello, Error> hello = make_unexpected(Error{ErrorCode::kFailure, "no hello", 0});
    std::thread other([&] {
      hello = detail::exchange_hello(ends->second, 5000, "test importer", PeerRole::kImporter);
    });
    auto peer = exporter_->add_peer(std::move(ends->first), 5000);
    other.join();
    EXPECT_TRUE(peer.has_value() && hello.has_value());
    raw_.emplace_back(peer ? *peer : 0, std::move(ends->second));
    return raw_.size() - 1;
  }

  // Publishes a tensor of `pool` to raw peer `index` and reads what crossed the socket.
  Seen publish_raw(std::size_t index, TensorPool& pool) {
    auto& [peer, channel] = raw_[index];
    auto id = exporter_->publish(peer, test::allocate(pool, {8}));
    EXPECT_TRUE(id.has_value()) << id.error().message;
    auto got = channel.receive(1000);
    Seen seen;
    if (!got || !*got || !std::holds_alternative<Publish>(**got)) {
      ADD_FAILURE() << "no Publish arrived";
      return seen;
    }
    const Publish& publish = std::get<Publish>(**got);
    auto d = decode(publish.descriptor.data(), publish.descriptor.size());
    EXPECT_TRUE(d.has_value());
    seen = Seen{d->export_id, d->allocation_id, publish.fd.valid(), publish.forget_allocation};
    EXPECT_EQ(seen.export_id, id.value_or(0));
    unreleased_.push_back({index, seen.export_id});
    return seen;
  }

  // Gives back every export a bare end of `channel` read.
  void release_all(Channel& channel) {
    for (auto& [index, export_id] : unreleased_) {
      if (&raw_[index].second == &channel && export_id != 0) {
        EXPECT_TRUE(channel.send(Release{export_id, false, {}}, 1000).has_value());
        export_id = 0;
      }
    }
  }

  // A real Importer connected to the exporter.
  Importer& connect_importer() {
    test::ConnectedImporter connected = test::connect_importer(*exporter_);
    EXPECT_TRUE(connected.importer.has_value());
    importers_.push_back(std::move(connected));
    return *importers_.back().importer;
  }
  PeerId importer_peer() const { return importers_.back().peer; }
  test::FakeCudaIpc& ipc() { return scope_->ipc(); }
  // The id of the allocation `pool`'s blocks lie in, as a descriptor names it.
  std::uint64_t allocation_of(TensorPool& pool) {
    auto exported = export_tensor(test::allocate(pool, {8}), 999);
    EXPECT_TRUE(exported.has_value());
    return exported ? exported->descriptor().allocation_id : 0;
  }

  int fds_before_ = 0;
  std::optional<test::FakeCudaIpcScope> scope_{std::in_place};
  std::optional<Exporter> exporter_;
  std::shared_ptr<TensorPool> pool_;
  std::vector<std::shared_ptr<TensorPool>> pools_;
  std::vector<std::pair<PeerId, Channel>> raw_;
  std::vector<std::pair<std::size_t, std::uint64_t>> unreleased_;
  std::vector<test::ConnectedImporter> importers_;
};

TEST_F(IpcFdOnce, OnlyTheFirstPublishOfAnAllocationToAPeerCarriesItsFd) {
  const std::size_t peer = raw_peer();
  const Seen first = publish_raw(peer, *pool_);
  const Seen second = publish_raw(peer, *pool_);
  const Seen third = publish_raw(peer, *pool_);
  EXPECT_TRUE(first.fd);
  EXPECT_FALSE(second.fd) << "the peer has this allocation's fd already";
  EXPECT_FALSE(third.fd);
  EXPECT_NE(first.allocation_id, 0u);
  EXPECT_EQ(second.allocation_id, first.allocation_id) << "one pool, one allocation";
  EXPECT_EQ(first.forget + second.forget + third.forget, 0u);
  EXPECT_EQ(exporter_->stats().fds_sent, 1u);
  EXPECT_EQ(exporter_->stats().published, 3u);
}

TEST_F(IpcFdOnce, EachPeerGetsItsOwnFd) {
  const std::size_t a = raw_peer();
  const std::size_t b = raw_peer();
  EXPECT_TRUE(publish_raw(a, *pool_).fd);
  EXPECT_FALSE(publish_raw(a, *pool_).fd);
  EXPECT_TRUE(publish_raw(b, *pool_).fd) << "what peer a was sent says nothing of peer b";
  EXPECT_FALSE(publish_raw(b, *pool_).fd);
  EXPECT_EQ(exporter_->stats().fds_sent, 2u);
}

TEST_F(IpcFdOnce, AReconnectStartsOver) {
  const std::size_t first = raw_peer();
  EXPECT_TRUE(publish_raw(first, *pool_).fd);
  EXPECT_FALSE(publish_raw(first, *pool_).fd);
  release_all(raw_[first].second);
  { Channel gone = std::move(raw_[first].second); }  // hangs up
  const PeerId old = raw_[first].first;
  ASSERT_TRUE(test::poll_until(*exporter_, [&] { return !exporter_->connected(old); }));
  const std::size_t again = raw_peer();
  EXPECT_TRUE(publish_raw(again, *pool_).fd) << "a new connection has no mapping";
  EXPECT_FALSE(publish_raw(again, *pool_).fd);
  EXPECT_EQ(exporter_->stats().fds_sent, 2u);
}

TEST_F(IpcFdOnce, ImportsWithoutFdUseTheMappingOfTheFirst) {
  Importer& importer = connect_importer();
  std::vector<Tensor> kept;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(exporter_->publish(importer_peer(), test::allocate(*pool_, {8})).has_value());
    kept.push_back(test::receive_one(importer));
    ASSERT_TRUE(static_cast<bool>(kept.back()));
  }
  EXPECT_EQ(importer.stats().fds_received, 1u);
  EXPECT_EQ(importer.stats().mappings_opened, 1u);
  EXPECT_EQ(importer.stats().imported, 3u);
  EXPECT_EQ(exporter_->stats().fds_sent, 1u);
  EXPECT_EQ(ipc().calls(CudaIpcEntry::kMemImportFromShareableHandle), 1u);
  kept.clear();
}

// The first import of the allocation fails to map; the second Publish left before the refusal
// reached the exporter, so it has no fd and is refused too. The refusals make the next one carry
// the fd again, and it imports.
TEST_F(IpcFdOnce, ARefusedImportMakesTheNextPublishCarryTheFdAgain) {
  Importer& importer = connect_importer();
  ipc().fail_next(CudaIpcEntry::kMemImportFromShareableHandle, CUDA_ERROR_OUT_OF_MEMORY);
  auto first = exporter_->publish(importer_peer(), test::allocate(*pool_, {8}));
  auto second = exporter_->publish(importer_peer(), test::allocate(*pool_, {8}));
  ASSERT_TRUE(first && second);
  EXPECT_EQ(exporter_->stats().fds_sent, 1u) << "the refusal has not been read yet";

  auto refused = importer.receive(1000);
  ASSERT_FALSE(refused.has_value()) << "mapped although the driver failed";
  EXPECT_EQ(refused.error().code, ErrorCode::kFailure);
  auto unmapped = importer.receive(1000);
  ASSERT_FALSE(unmapped.has_value()) << "imported without a mapping";
  EXPECT_EQ(unmapped.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(unmapped.error().message, "ipc import: export " + std::to_string(*second) +
                                          " came without the file descriptor of allocation " +
                                          std::to_string(allocation_of(*pool_)) +
                                          ", which is not mapped here");
  ASSERT_TRUE(test::poll_until(*exporter_, [&] {
    return exporter_->stats().refused_exports == 2 && exporter_->held() == 0;
  })) << "the refused exports' claims did not come back";

  ASSERT_TRUE(exporter_->publish(importer_peer(), test::allocate(*pool_, {8})).has_value());
  Tensor third = test::receive_one(importer);
  EXPECT_TRUE(static_cast<bool>(third)) << "the fd did not come again";
  EXPECT_EQ(exporter_->stats().fds_sent, 2u);
  EXPECT_EQ(importer.stats().fds_received, 2u);
  EXPECT_EQ(importer.stats().refused, 2u);
  ASSERT_TRUE(exporter_->publish(importer_peer(), test::allocate(*pool_, {8})).has_value());
  Tensor fourth = test::receive_one(importer);
  EXPECT_TRUE(static_cast<bool>(fourth));
  EXPECT_EQ(exporter_->stats().fds_sent, 2u) << "mapped now: no fd again";
}

// Past kRememberedAllocations, a Publish names the least recently published allocation, which the
// importer unmaps; that one's next Publish carries its fd again and imports.
TEST_F(IpcFdOnce, ThePeerIsToldWhichAllocationToForgetPastTheBound) {
  Importer& importer = connect_importer();
  for (std::size_t i = 0; i <= kRememberedAllocations; ++i) {
    pools_.push_back(test::make_device_pool(1024, 1, test::PoolKind::kShareable));
    ASSERT_NE(pools_.back(), nullptr);
    ASSERT_TRUE(exporter_->publish(importer_peer(), test::allocate(*pools_.back(), {8})));
    EXPECT_TRUE(static_cast<bool>(test::receive_one(importer)));
  }
  EXPECT_EQ(exporter_->stats().fds_sent, kRememberedAllocations + 1);
  EXPECT_EQ(importer.cached_mappings(), kRememberedAllocations) << "the first was forgotten";
  ASSERT_TRUE(test::poll_until(*exporter_, [&] { return exporter_->held() == 0; }));
  ASSERT_TRUE(exporter_->publish(importer_peer(), test::allocate(*pools_.front(), {8})));
  EXPECT_TRUE(static_cast<bool>(test::receive_one(importer)));
  EXPECT_EQ(exporter_->stats().fds_sent, kRememberedAllocations + 2) << "its fd went again";
  EXPECT_EQ(importer.cached_mappings(), kRememberedAllocations);
  EXPECT_EQ(importer.stats().refused, 0u);
}

// A malformed exporter: a Publish without fd of an allocation it never sent is refused for that
// tensor alone, given back as a refusal, and the connection goes on.
TEST_F(IpcFdOnce, APublishWithoutFdOfAnUnknownAllocationIsRefusedAndTheChannelGoesOn) {
  test::RawExporterLink link = test::raw_exporter_link();
  ASSERT_TRUE(link.raw && link.importer);
  Channel& raw = *link.raw;
  Importer& importer = *link.importer;

  Tensor tensor = test::allocate(*pool_, {8});
  auto exported = export_tensor(tensor, 41);
  ASSERT_TRUE(exported.has_value()) << exported.error().message;
  auto bytes = encode(exported->descriptor());
  ASSERT_TRUE(bytes.has_value());
  ASSERT_TRUE(raw.send(Publish{*bytes, UniqueFd()}, 1000).has_value());
  auto got = importer.receive(1000);
  ASSERT_FALSE(got.has_value()) << "imported memory it never mapped";
  EXPECT_EQ(got.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(got.error().message,
            "ipc import: export 41 came without the file descriptor of allocation " +
                std::to_string(exported->descriptor().allocation_id) +
                ", which is not mapped here");
  auto release = raw.receive(1000);
  ASSERT_TRUE(release && *release && std::holds_alternative<Release>(**release));
  EXPECT_EQ(std::get<Release>(**release).export_id, 41u);
  EXPECT_TRUE(std::get<Release>(**release).refused);
  EXPECT_FALSE(std::get<Release>(**release).has_event);

  // The allocation again as new exports (a given-back one is never imported again): with its
  // fd, then once more without: both import.
  auto renumbered = [&](std::uint64_t export_id) {
    TensorDescriptor d = exported->descriptor();
    d.export_id = export_id;
    return *encode(d);
  };
  Publish with_fd{renumbered(42), UniqueFd(::fcntl(exported->fd(), F_DUPFD_CLOEXEC, 0))};
  ASSERT_TRUE(raw.send(with_fd, 1000).has_value());
  Tensor first = test::receive_one(importer);
  EXPECT_TRUE(static_cast<bool>(first));
  ASSERT_TRUE(raw.send(Publish{renumbered(43), UniqueFd()}, 1000).has_value());
  Tensor second = test::receive_one(importer);
  EXPECT_TRUE(static_cast<bool>(second)) << "the channel did not go on";
  EXPECT_EQ(second.data(), first.data()) << "one mapping of the allocation";
  EXPECT_EQ(importer.stats().refused, 1u);
  EXPECT_EQ(ipc().calls(CudaIpcEntry::kMemImportFromShareableHandle), 1u);
}

// A buggy exporter: a Publish without fd that names a mapped allocation on another device than
// it was mapped on is refused, never imported as that device's memory.
// Only the channel's fds say what an allocation is. A caller's import_tensor() of the allocation
// with another allocation's fd (the same size) serves that import alone: it must never become the
// mapping that the exporter's Publishes of the allocation read, whether it came before the first
// Publish (which carries the fd) or after it (later ones come without).
TEST_F(IpcFdOnce, ACallersWrongFdNeverBecomesTheMappingPublishesRead) {
  for (const bool before : {true, false}) {
    Importer& importer = connect_importer();
    auto& other = pools_.emplace_back(test::make_device_pool(1024, 4, test::PoolKind::kShareable));
    ASSERT_NE(other, nullptr);
    Tensor a = filled(*pool_, 1.0f);
    Tensor b = filled(*other, 2.0f);
    auto publish_a = [&] {
      auto id = exporter_->publish(importer_peer(), a);
      ASSERT_TRUE(id.has_value()) << id.error().message;
      Tensor imported = test::receive_one(importer);
      ASSERT_TRUE(imported);
      EXPECT_EQ(differing(imported, 1.0f), 0)
          << "export " << *id << " read another allocation (wrong fd "
          << (before ? "before" : "after") << " the first Publish)";
    };
    if (!before) {
      publish_a();
    }
    {
      auto described = export_tensor(a, 1000);
      auto wrong = export_tensor(b, 1001);
      ASSERT_TRUE(described.has_value() && wrong.has_value());
      auto aside = import_tensor(described->descriptor(),
                                 UniqueFd(::fcntl(wrong->fd(), F_DUPFD_CLOEXEC, 0)), importer);
      ASSERT_TRUE(aside.has_value()) << aside.error().message;
    }
    publish_a();
    publish_a();
  }
}

TEST(IpcFdOnceDevices, APublishWithoutFdOnAnotherDeviceIsRefused) {
  test::FakeCudaIpcScope scope(2);
  auto pool = test::make_device_pool(1024, 1, test::PoolKind::kShareable);
  ASSERT_NE(pool, nullptr);
  test::RawExporterLink link = test::raw_exporter_link();
  ASSERT_TRUE(link.raw && link.importer);
  Tensor tensor = test::allocate(*pool, {8});
  auto exported = export_tensor(tensor, 41);
  ASSERT_TRUE(exported.has_value()) << exported.error().message;
  auto bytes = encode(exported->descriptor());
  ASSERT_TRUE(bytes.has_value());
  ASSERT_TRUE(
      link.raw->send(Publish{*bytes, UniqueFd(::fcntl(exported->fd(), F_DUPFD_CLOEXEC, 0))}, 1000)
          .has_value());
  Tensor first = test::receive_one(*link.importer);
  ASSERT_TRUE(static_cast<bool>(first));
  EXPECT_EQ(first.device().device_id, 0);

  TensorDescriptor elsewhere = exported->descriptor();
  elsewhere.export_id = 42;
  elsewhere.device_uuid = test::FakeCudaIpc::default_uuid(1);
  auto moved = encode(elsewhere);
  ASSERT_TRUE(moved.has_value());
  ASSERT_TRUE(link.raw->send(Publish{*moved, UniqueFd()}, 1000).has_value());
  auto got = link.importer->receive(1000);
  ASSERT_FALSE(got.has_value()) << "imported device 0's mapping as memory of device "
                                << (got && *got ? (*got)->device().device_id : -1);
  EXPECT_EQ(got.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(got.error().message,
            "ipc import: export 42 came without the file descriptor of allocation " +
                std::to_string(elsewhere.allocation_id) + ", which is not mapped here");
  auto release = link.raw->receive(1000);
  ASSERT_TRUE(release && *release && std::holds_alternative<Release>(**release));
  EXPECT_EQ(std::get<Release>(**release).export_id, 42u);
  EXPECT_TRUE(std::get<Release>(**release).refused);
}

// The orderings of a refusal, without sockets: a refusal of the export that carried the fd, or of
// a later one, means the peer holds no mapping (it dropped it when it refused); a refusal of an
// export before the fd went means the peer mapped the fd after refusing, so nothing changes.
TEST(IpcSentFds, ARefusalForgetsTheFdOnlyFromTheExportThatCarriedIt) {
  detail::SentFds fds;
  EXPECT_TRUE(fds.plan(0).attach_fd) << "id 0: a fresh fd for every export";
  fds.sent(0, fds.plan(0), 1);
  EXPECT_EQ(fds.size(), 0u);

  auto plan = fds.plan(7);
  EXPECT_TRUE(plan.attach_fd);
  fds.sent(7, plan, 10);  // export 10 carried the fd
  EXPECT_FALSE(fds.plan(7).attach_fd);
  fds.refused(7, 9);  // refused before export 10 was read: the peer maps export 10's fd after
  EXPECT_FALSE(fds.plan(7).attach_fd);
  fds.refused(7, 11);  // refused after: the peer dropped its mapping
  EXPECT_TRUE(fds.plan(7).attach_fd);
  fds.refused(7, 12);  // a second refusal in flight changes nothing more
  EXPECT_EQ(fds.size(), 0u);

  for (std::uint64_t id = 1; id <= kRememberedAllocations; ++id) {
    fds.sent(id, fds.plan(id), 100 + id);
  }
  fds.sent(1, fds.plan(1), 300);  // 1 is the most recent now, 2 the least
  plan = fds.plan(1000);
  EXPECT_TRUE(plan.attach_fd);
  EXPECT_EQ(plan.forget, 2u);
  fds.sent(1000, plan, 301);
  EXPECT_EQ(fds.size(), kRememberedAllocations);
  EXPECT_TRUE(fds.plan(2).attach_fd);
  EXPECT_FALSE(fds.plan(1).attach_fd);
}

// A caller's import_tensor of an id the exporter has not published yet, refused: its Release
// reached the exporter before it held the export, which ignored it. When the exporter then
// published that id, the importer refused it as given back already and sent nothing: the claim,
// and its pool block, stayed until the importing process exited.
TEST_F(IpcFdOnce, ACallersRefusedIdAheadOfTheExportersNeverPinsItsClaim) {
  Importer& importer = connect_importer();
  Tensor learn = test::allocate(*pool_, {8});
  auto learned = exporter_->publish(importer_peer(), learn);
  ASSERT_TRUE(learned.has_value()) << learned.error().message;
  Tensor first = test::receive_one(importer);
  ASSERT_TRUE(static_cast<bool>(first));
  first = Tensor();
  learn = Tensor();
  ASSERT_TRUE(test::poll_until(*exporter_, [&] { return exporter_->held() == 0; }));
  const std::uint64_t next = *learned + 1;  // the id the exporter gives its next Publish
  Tensor tensor = test::allocate(*pool_, {8});
  {
    auto aside = export_tensor(tensor, next);
    ASSERT_TRUE(aside.has_value()) << aside.error().message;
    TensorDescriptor elsewhere = aside->descriptor();
    elsewhere.device_uuid[0] ^= 0xff;  // a device this process does not see: refused
    ASSERT_FALSE(import_tensor(elsewhere, UniqueFd(), importer).has_value());
  }
  ASSERT_TRUE(test::poll_until(*exporter_, [&] {
    return exporter_->stats().ignored_releases == 1;
  })) << "the refusal's Release did not reach the exporter";
  auto published = exporter_->publish(importer_peer(), tensor);
  ASSERT_TRUE(published.has_value()) << published.error().message;
  ASSERT_EQ(*published, next);
  auto again = importer.receive(1000);
  ASSERT_FALSE(again.has_value()) << "imported an export refused here before";
  EXPECT_EQ(again.error().message,
            "ipc import: export " + std::to_string(next) +
                " was given back or refused here before this connection's exporter published it "
                "(an import_tensor of it): refused, and given back again");
  tensor = Tensor();
  EXPECT_TRUE(test::poll_until(*exporter_, [&] { return exporter_->held() == 0; }))
      << "the exporter's claim stayed with the refused Publish";
  // The importer kept the allocation's mapping, and the exporter still counts its fd sent: the
  // next Publish goes without it. A refused Release made the exporter count the mapping let go,
  // one fewer than the importer kept, until an eviction on the importer's side refused a Publish.
  EXPECT_EQ(exporter_->stats().refused_exports, 0u);
  const std::uint64_t fds_sent = exporter_->stats().fds_sent;
  Tensor later = test::allocate(*pool_, {8});
  ASSERT_TRUE(exporter_->publish(importer_peer(), later).has_value());
  Tensor imported = test::receive_one(importer);
  EXPECT_TRUE(static_cast<bool>(imported)) << "the channel did not go on";
  EXPECT_EQ(exporter_->stats().fds_sent, fds_sent) << "the fd went again";
}

// A caller's import_tensor refused (a device this process does not see) let go of the mapping the
// channel had made of the allocation; the exporter, which resends an fd only after refusals of
// its own exports, still counted it sent, so its next Publish of the allocation (without the fd)
// was refused.
TEST_F(IpcFdOnce, ACallersRefusedImportLeavesTheChannelsMapping) {
  Importer& importer = connect_importer();
  Tensor tensor = test::allocate(*pool_, {8});
  ASSERT_TRUE(exporter_->publish(importer_peer(), tensor).has_value());
  Tensor first = test::receive_one(importer);
  ASSERT_TRUE(static_cast<bool>(first));
  ASSERT_EQ(importer.cached_mappings(), 1u);
  {
    auto aside = export_tensor(tensor, 1u << 30);
    ASSERT_TRUE(aside.has_value()) << aside.error().message;
    TensorDescriptor elsewhere = aside->descriptor();
    elsewhere.device_uuid[0] ^= 0xff;
    auto refused = import_tensor(elsewhere, UniqueFd(), importer);
    ASSERT_FALSE(refused.has_value());
    EXPECT_EQ(refused.error().code, ErrorCode::kNotFound) << refused.error().message;
  }
  EXPECT_EQ(importer.cached_mappings(), 1u) << "a caller's refusal dropped the channel's mapping";
  ASSERT_TRUE(exporter_->publish(importer_peer(), tensor).has_value());
  Tensor second = test::receive_one(importer);
  EXPECT_TRUE(static_cast<bool>(second)) << "the exporter's next Publish was refused";
}

}  // namespace
}  // namespace holoscan::ipc
