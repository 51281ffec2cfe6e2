#include "support/ipc_exporter_test.hpp"

#include <variant>

#include "holoscan/deferred_release.hpp"
#include "ipc/transport/ipc_handshake.hpp"
#include "support/ipc_peers.hpp"
#include "support/ipc_raw_socket.hpp"

namespace holoscan::test {

void ExporterTest::SetUp() {
  fds_before_ = open_fd_count();
  ASSERT_EQ(pending_deferred_releases(), 0u);
  auto exporter = ipc::Exporter::create();
  ASSERT_TRUE(exporter.has_value()) << exporter.error().message;
  exporter_.emplace(std::move(*exporter));
  pool_ = make_device_pool(1024, blocks_, PoolKind::kShareable);
  ASSERT_NE(pool_, nullptr);
}

void ExporterTest::TearDown() {
  if (importer_.pid() > 0) {
    (void)importer_.kill();
    (void)importer_.reap();
  }
  if (exporter_) {
    EXPECT_TRUE(poll_until(*exporter_, [&] { return exporter_->held() == 0; }))
        << exporter_->held() << " claim(s) never dropped";
    exporter_.reset();
  }
  pool_.reset();
  importer_.steps().close();
  scope_.reset();
  EXPECT_EQ(open_fd_count(), fds_before_) << "descriptor leak";
}

ipc::PeerId ExporterTest::add_peer(ipc::Channel channel) {
  auto peer = exporter_->add_peer(std::move(channel), 10000);
  if (!peer) {
    ADD_FAILURE() << "add_peer: " << peer.error().message;
    return 0;
  }
  return *peer;
}

bool importer_hello(ipc::Channel& channel) {
  return ipc::detail::exchange_hello(channel, 10000, "test importer", ipc::PeerRole::kImporter)
      .has_value();
}

std::optional<ipc::TensorDescriptor> next_publish(ipc::Channel& channel) {
  auto got = channel.receive(10000);
  if (!got || !*got) {
    return std::nullopt;
  }
  const auto* publish = std::get_if<ipc::Publish>(&**got);
  if (publish == nullptr) {
    return std::nullopt;
  }
  auto descriptor = ipc::decode(publish->descriptor.data(), publish->descriptor.size());
  return descriptor ? std::optional<ipc::TensorDescriptor>(*descriptor) : std::nullopt;
}

}  // namespace holoscan::test
