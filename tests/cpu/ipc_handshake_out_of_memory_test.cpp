// Covers Exporter::add_peer and Importer::create when the host runs out of memory, with each of
// their allocations made to fail in turn (support/allocation_hooks): no exception escapes, the
// refusal is kResourceExhausted, the channel taken is closed (the other end reads end-of-file),
// and no descriptor or epoll registration is left behind.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <optional>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "holoscan/ipc.hpp"
#include "support/allocation_hooks.hpp"
#include "support/fake_cuda_ipc.hpp"
#include "support/gtest_printers.hpp"
#include "support/ipc_peers.hpp"
#include "support/ipc_raw_socket.hpp"

namespace holoscan::ipc {
namespace {

// One handshake under failing allocations; raw_hung_up: the other end read end-of-file after it.
template <class Result>
struct Handshake {
  std::optional<Result> result;
  bool threw = false;
  std::uint64_t failed = 0;
  bool raw_hung_up = false;
};

// Runs `take(channel)` with `count` allocations failing after the first `skip`, a raw channel end
// answering Hello on another thread: an Importer's Hello unless `take` makes an Importer.
template <class Result, class Take>
Handshake<Result> handshake_failing(std::uint64_t skip, std::uint64_t count, Take take) {
  constexpr PeerRole kRawRole =
      std::is_same_v<Result, expected<Importer, Error>> ? PeerRole::kExporter : PeerRole::kImporter;
  Handshake<Result> attempt;
  auto ends = Channel::pair();
  if (!ends) {
    ADD_FAILURE() << ends.error().message;
    return attempt;
  }
  Channel raw = std::move(ends->second);
  std::thread peer([&raw] {
    (void)raw.send(
        Hello{static_cast<std::uint32_t>(::getpid()), kProtocolVersion, UniqueFd(), kRawRole},
        5000);
    (void)raw.receive(5000);
  });
  {
    test::FailingAllocations failing(skip, count);
    try {
      attempt.result.emplace(take(std::move(ends->first)));
    } catch (...) {
      attempt.threw = true;
    }
    attempt.failed = failing.failed();
  }
  peer.join();
  if (attempt.result && !attempt.result->has_value()) {
    pollfd entry{raw.fd(), POLLIN, 0};
    auto next =
        ::poll(&entry, 1, 1000) == 1 ? raw.receive(0) : expected<std::optional<Message>, Error>();
    attempt.raw_hung_up = !next && next.error().code == ErrorCode::kClosed;
  }
  return attempt;
}

// One allocation failing, then every one from there on (a refusal's own message then fails too).
constexpr std::uint64_t kCounts[] = {1, ~std::uint64_t{0}};

TEST(IpcHandshakeOutOfMemory, AddPeerIsResourceExhaustedWhateverAllocationFails) {
  test::FakeCudaIpcScope scope;
  auto exporter = Exporter::create();
  ASSERT_TRUE(exporter.has_value());
  const int fds_before = test::open_fd_count();
  for (const std::uint64_t count : kCounts) {
    for (std::uint64_t skip = 0;; ++skip) {
      auto attempt = handshake_failing<expected<PeerId, Error>>(skip, count, [&](Channel channel) {
        return exporter->add_peer(std::move(channel), 5000);
      });
      ASSERT_FALSE(attempt.threw) << "an exception escaped add_peer at allocation " << skip;
      ASSERT_TRUE(attempt.result.has_value());
      const auto& peer = *attempt.result;
      if (!peer) {
        EXPECT_EQ(peer.error().code, ErrorCode::kResourceExhausted)
            << "allocation " << skip << ": " << peer.error().message;
        EXPECT_TRUE(attempt.raw_hung_up) << "allocation " << skip << " kept the channel open";
      } else {
        EXPECT_TRUE(exporter->connected(*peer)) << "allocation " << skip;
      }
      ASSERT_TRUE(test::poll_until(*exporter, [&] { return !peer || !exporter->connected(*peer); }))
          << "the peer never left after its channel hung up";
      EXPECT_EQ(test::open_fd_count(), fds_before) << "descriptor leak at allocation " << skip;
      if (attempt.failed == 0) {
        break;
      }
    }
  }
  pollfd entry{exporter->fd(), POLLIN, 0};
  EXPECT_EQ(::poll(&entry, 1, 0), 0) << "a registration outlived its peer";
}

// As above, with another copy of each exporter-side socket kept (a launcher that made the pair):
// an epoll registration left behind by a failed add_peer would outlive the exporter's descriptor
// and keep fd() readable once the peer hangs up.
TEST(IpcHandshakeOutOfMemory, AFailedAddPeerLeavesNoRegistrationWhenTheSocketLivesOn) {
  test::FakeCudaIpcScope scope;
  auto exporter = Exporter::create();
  ASSERT_TRUE(exporter.has_value());
  std::vector<UniqueFd> copies;
  copies.reserve(1024);  // kept without allocating while allocations fail
  for (const std::uint64_t count : kCounts) {
    for (std::uint64_t skip = 0;; ++skip) {
      auto attempt = handshake_failing<expected<PeerId, Error>>(skip, count, [&](Channel channel) {
        copies.emplace_back(::fcntl(channel.fd(), F_DUPFD_CLOEXEC, 0));
        auto added = exporter->add_peer(std::move(channel), 5000);
        if (!added) {
          // The copy keeps the socket: the peer learns of the refusal by a shutdown instead, which
          // a registration left behind would report too.
          (void)::shutdown(copies.back().get(), SHUT_RDWR);
        }
        return added;
      });
      ASSERT_FALSE(attempt.threw) << "an exception escaped add_peer at allocation " << skip;
      ASSERT_TRUE(attempt.result.has_value());
      const auto& peer = *attempt.result;
      ASSERT_TRUE(test::poll_until(*exporter, [&] { return !peer || !exporter->connected(*peer); }))
          << "the peer never left after its channel hung up";
      pollfd entry{exporter->fd(), POLLIN, 0};
      EXPECT_EQ(::poll(&entry, 1, 0), 0) << "allocation " << skip << " left a registration";
      if (attempt.failed == 0) {
        break;
      }
      ASSERT_LT(copies.size(), copies.capacity());
    }
  }
}

expected<Importer, Error> create_importer(Channel channel) {
  return Importer::create(std::move(channel), 5000);
}

TEST(IpcHandshakeOutOfMemory, ImporterCreateIsResourceExhaustedWhateverAllocationFails) {
  test::FakeCudaIpcScope scope;
  // The courier's thread starts with the process's first Importer: not a leak of the sweep.
  auto first = handshake_failing<expected<Importer, Error>>(0, 0, create_importer);
  ASSERT_TRUE(first.result.has_value() && first.result->has_value());
  first.result.reset();
  const int fds_before = test::open_fd_count();
  for (const std::uint64_t count : kCounts) {
    for (std::uint64_t skip = 0;; ++skip) {
      auto attempt = handshake_failing<expected<Importer, Error>>(skip, count, create_importer);
      ASSERT_FALSE(attempt.threw) << "an exception escaped Importer::create at allocation " << skip;
      ASSERT_TRUE(attempt.result.has_value());
      if (!attempt.result->has_value()) {
        EXPECT_EQ(attempt.result->error().code, ErrorCode::kResourceExhausted)
            << "allocation " << skip << ": " << attempt.result->error().message;
        EXPECT_TRUE(attempt.raw_hung_up) << "allocation " << skip << " kept the channel open";
      }
      attempt.result.reset();
      EXPECT_EQ(test::open_fd_count(), fds_before) << "descriptor leak at allocation " << skip;
      if (attempt.failed == 0) {
        break;
      }
    }
  }
}

}  // namespace
}  // namespace holoscan::ipc
