// Covers Exporter::publish when the host runs out of memory, with each of its allocations made to
// fail in turn (the test binary's operator new, support/allocation_hooks): no exception escapes,
// the refusal is kResourceExhausted, the ledger holds a claim for exactly the exports the importer
// received, and the pool's descriptor, which publish only borrows, stays open and usable. Also
// Exporter::poll (no exception escapes, the peer stays connected), Importer::receive (the export
// is given back) and the shareable pool provider (kResourceExhausted).
#include <fcntl.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "holoscan/ipc.hpp"
#include "holoscan/pool_memory.hpp"
#include "holoscan/tensor_pool.hpp"
#include "support/allocation_hooks.hpp"
#include "support/fake_cuda_ipc.hpp"
#include "support/gtest_printers.hpp"
#include "support/ipc_peers.hpp"
#include "support/ipc_raw_socket.hpp"

namespace holoscan::ipc {
namespace {

// One publish with the allocation after the first `skip` failing.
struct Attempt {
  expected<std::uint64_t, Error> result = 0;
  bool threw = false;
  std::uint64_t failed = 0;
};

Attempt publish_failing(Exporter& exporter, PeerId peer, const Tensor& tensor, std::uint64_t skip) {
  Attempt attempt;
  test::FailingAllocations failing(skip);
  try {
    attempt.result = exporter.publish(peer, tensor);
  } catch (...) {
    attempt.threw = true;
  }
  attempt.failed = failing.failed();
  return attempt;
}

TEST(IpcOutOfMemory, PublishIsResourceExhaustedAndKeepsTheLedgerAndTheBorrowedFd) {
  const int fds_before = test::open_fd_count();
  std::optional<test::FakeCudaIpcScope> scope(std::in_place);
  std::optional<test::LocalLink> link(test::local_link(1));
  ASSERT_TRUE(link->ok());
  Exporter& exporter = *link->exporter;
  Tensor tensor = test::allocate(*link->pool, {8});
  static_cast<float*>(tensor.data())[0] = 7.0f;
  const cudaStream_t producer = scope->fake().create_stream(0);
  ASSERT_TRUE(tensor.set_readiness_stream(producer));
  int pool_fd = -1;
  {
    auto probe = export_tensor(tensor, 1000);  // lends the pool's descriptor, as publish does
    ASSERT_TRUE(probe.has_value()) << probe.error().message;
    pool_fd = probe->fd();
  }

  std::size_t sent = 0;
  for (std::uint64_t skip = 0;; ++skip) {
    const Attempt attempt = publish_failing(exporter, link->peer, tensor, skip);
    ASSERT_FALSE(attempt.threw) << "an exception escaped publish at allocation " << skip;
    sent += attempt.result.has_value() ? 1 : 0;
    if (!attempt.result) {
      EXPECT_EQ(attempt.result.error().code, ErrorCode::kResourceExhausted)
          << "allocation " << skip << ": " << attempt.result.error().message;
    }
    EXPECT_EQ(exporter.held(), sent) << "allocation " << skip << ": a claim the peer never saw";
    ASSERT_NE(::fcntl(pool_fd, F_GETFD), -1) << "allocation " << skip << " closed the pool's fd";
    if (attempt.failed == 0) {
      break;  // publish made fewer allocations than `skip`: every one has failed once
    }
  }
  EXPECT_GT(sent, 0u);
  for (std::size_t i = 0; i < sent; ++i) {
    Tensor imported = test::receive_one(*link->importer);
    ASSERT_TRUE(imported);
    EXPECT_EQ(imported.data_as<float>()[0], 7.0f) << "mapped through the pool's descriptor";
  }
  auto more = link->importer->receive(0);
  ASSERT_TRUE(more.has_value()) << more.error().message;
  EXPECT_FALSE(more->has_value()) << "a publish the ledger holds no claim for";
  tensor = Tensor();
  EXPECT_TRUE(test::poll_until(exporter, [&] { return exporter.held() == 0; }));
  link.reset();
  scope.reset();
  EXPECT_EQ(test::open_fd_count(), fds_before) << "descriptor leak";
}


// Polls with the allocation after the first `skip` failing; whether it threw, and how many failed.
std::pair<bool, std::uint64_t> poll_failing(Exporter& exporter, std::uint64_t skip) {
  test::FailingAllocations failing(skip);
  bool threw = false;
  try {
    (void)exporter.poll();
  } catch (...) {
    threw = true;
  }
  return {threw, failing.failed()};
}

// A frame refused out of memory is refused like any other: the peer stays connected, and its
// claim drops at its Release.
TEST(IpcOutOfMemory, ExporterPollKeepsThePeerWhateverAllocationFails) {
  test::FakeCudaIpcScope scope;
  auto pool = test::make_device_pool(1024, 1, test::PoolKind::kShareable);
  ASSERT_NE(pool, nullptr);
  auto exporter = Exporter::create();
  ASSERT_TRUE(exporter.has_value());
  auto ends = Channel::pair();
  ASSERT_TRUE(ends.has_value());
  Channel raw = std::move(ends->second);
  std::thread hello([&] {
    EXPECT_TRUE(raw.send(Hello{static_cast<std::uint32_t>(::getpid()), kProtocolVersion}, 5000));
    EXPECT_TRUE(raw.receive(5000).has_value());
  });
  auto peer = exporter->add_peer(std::move(ends->first), 5000);
  hello.join();
  ASSERT_TRUE(peer.has_value()) << peer.error().message;
  auto id = exporter->publish(*peer, test::allocate(*pool, {8}));
  ASSERT_TRUE(id.has_value());
  ASSERT_TRUE(raw.receive(1000).has_value());
  for (std::uint64_t skip = 0;; ++skip) {
    ASSERT_TRUE(test::send_raw(raw.fd(), std::vector<std::uint8_t>(3)));  // shorter than a header
    const auto [threw, failed] = poll_failing(*exporter, skip);
    ASSERT_FALSE(threw) << "an exception escaped poll at allocation " << skip;
    (void)exporter->poll();
    ASSERT_TRUE(exporter->connected(*peer)) << "allocation " << skip << " cut the peer off";
    if (failed == 0) {
      break;
    }
  }
  Release release;
  release.export_id = *id;
  ASSERT_TRUE(raw.send(release, 1000));
  EXPECT_TRUE(test::poll_until(*exporter, [&] { return exporter->held() == 0; }));
}

// Receives with the allocation after the first `skip` failing; an import is dropped at once.
Attempt receive_failing(Importer& importer, std::uint64_t skip) {
  Attempt attempt;
  std::optional<Tensor> imported;
  {
    test::FailingAllocations failing(skip);
    try {
      auto received = importer.receive(1000);
      if (received) {
        imported = std::move(*received);
      } else {
        attempt.result = make_unexpected(std::move(received.error()));
      }
    } catch (...) {
      attempt.threw = true;
    }
    attempt.failed = failing.failed();
  }
  return attempt;
}

TEST(IpcOutOfMemory, ReceiveGivesTheExportBackWhateverAllocationFails) {
  test::FakeCudaIpcScope scope;
  for (std::uint64_t skip = 0;; ++skip) {
    test::LocalLink link = test::local_link(1);  // a first import: nothing mapped or listed yet
    ASSERT_TRUE(link.ok());
    Exporter& exporter = *link.exporter;
    {
      Tensor tensor = test::allocate(*link.pool, {8});
      ASSERT_TRUE(exporter.publish(link.peer, tensor).has_value());
    }
    const Attempt attempt = receive_failing(*link.importer, skip);
    ASSERT_FALSE(attempt.threw) << "an exception escaped receive at allocation " << skip;
    if (!attempt.result) {
      EXPECT_EQ(attempt.result.error().code, ErrorCode::kResourceExhausted)
          << "allocation " << skip << ": " << attempt.result.error().message;
    }
    auto again = link.importer->receive(0);  // a Publish left unread is imported now
    ASSERT_TRUE(again.has_value()) << again.error().message;
    again = {};
    ASSERT_TRUE(test::poll_until(exporter, [&] { return exporter.held() == 0; }))
        << "allocation " << skip << ": the export was never given back";
    EXPECT_EQ(link.importer->outstanding(), 0u) << "allocation " << skip;
    if (attempt.failed == 0) {
      break;
    }
  }
}

// The shareable provider makes a pool's memory: out of host memory it says so, and leaks nothing
// (the fake checks for VMM handles, reservations and mappings left when its scope ends).
TEST(IpcOutOfMemory, ShareableProviderIsResourceExhaustedWhateverAllocationFails) {
  test::FakeCudaIpcScope scope;
  const std::shared_ptr<PoolMemoryProvider> provider = shareable_pool_memory();
  for (std::uint64_t skip = 0;; ++skip) {
    expected<std::unique_ptr<PoolAllocation>, Error> made = nullptr;
    bool threw = false;
    std::uint64_t failed = 0;
    {
      test::FailingAllocations failing(skip);
      try {
        made = provider->allocate(0, 4096);
      } catch (...) {
        threw = true;
      }
      failed = failing.failed();
    }
    ASSERT_FALSE(threw) << "an exception escaped allocate at allocation " << skip;
    if (!made) {
      EXPECT_EQ(made.error().code, ErrorCode::kResourceExhausted)
          << "allocation " << skip << ": " << made.error().message;
    }
    if (failed == 0) {
      ASSERT_TRUE(made.has_value()) << made.error().message;
      break;
    }
  }
}

}  // namespace
}  // namespace holoscan::ipc
