// Covers the claim state machine as the Exporter runs it against an importer that speaks the
// protocol by hand (a forked child without CUDA): a Release whose event cannot be opened leaves
// the claim released but held until the importer has exited, and a later Release for the same
// export (a duplicate, without event) is a protocol error that changes nothing. Out of memory
// while a Release is taken, nothing escapes poll() and the claim is kept as safely.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>

#include "support/allocation_hooks.hpp"

#include "support/gtest_printers.hpp"
#include "support/ipc_exporter_test.hpp"
#include "support/ipc_peers.hpp"
#include "support/ipc_raw_socket.hpp"

namespace holoscan::ipc {
namespace {

using test::CudaIpcEntry;

class IpcReleaseProtocol : public test::ExporterTest {
 protected:
  // One tensor published to an importer that releases each export with an event, once per
  // allocation index: its Release is taken by poll() with the allocation after the first `skip`
  // failing, then `check(peer, skip, threw)` runs; until no allocation failed. Then every
  // claim and block must come back once the importer has exited.
  template <class Check>
  void sweep_taking_releases(Check check);
};

// Releases export `id` twice: first with an event, then again without one.
int release_twice(Channel& channel, test::Steps& steps) {
  const auto publish = test::next_publish(channel);
  if (!publish) {
    return 11;
  }
  Release with_event;
  with_event.export_id = publish->export_id;
  with_event.has_event = true;
  with_event.event.fill(0x5a);
  if (!channel.send(with_event, 10000) || !channel.send(Release{publish->export_id, false, {}})) {
    return 12;
  }
  steps.send('r');
  return steps.receive() == 'x' ? 0 : 13;  // lives until the test lets it exit
}

TEST_F(IpcReleaseProtocol, UnopenableEventKeepsTheClaimUntilTheImporterExitsWhateverFollows) {
  const PeerId peer = fork_importer(importer_, release_twice);
  ASSERT_NE(peer, 0u);
  ipc().fail_next(CudaIpcEntry::kIpcOpenEventHandle, cudaErrorInvalidResourceHandle);
  ASSERT_TRUE(exporter_->publish(peer, test::allocate(*pool_, {16})).has_value());
  ASSERT_EQ(importer_.steps().receive(), 'r');
  ASSERT_TRUE(test::poll_until(*exporter_, [&] { return exporter_->stats().releases == 2; }));
  for (int i = 0; i < 3; ++i) {
    (void)exporter_->poll();
  }
  EXPECT_EQ(exporter_->stats().unopenable_events, 1u);
  EXPECT_EQ(exporter_->stats().ignored_releases, 1u) << "the second Release is a protocol error";
  EXPECT_EQ(exporter_->held(), 1u) << "freed before the importer's GPU work was known complete";
  EXPECT_EQ(pool_->available_blocks(), blocks_ - 1);

  ASSERT_TRUE(importer_.steps().send('x'));
  EXPECT_EQ(importer_.reap(), 0);
  ASSERT_TRUE(test::poll_until(*exporter_, [&] { return exporter_->held() == 0; }))
      << "the exited importer's claim was never dropped";
  EXPECT_EQ(pool_->available_blocks(), blocks_);
  EXPECT_EQ(exporter_->stats().dropped, 1u);
}

// For each 'p' the test sends, releases the next export with its own readiness event (one this
// process's fake can open) and answers 'r'; exits at anything else.
int release_each_with_an_event(Channel& channel, test::Steps& steps) {
  while (steps.receive() == 'p') {
    const auto publish = test::next_publish(channel);
    if (!publish) {
      return 11;
    }
    if (!channel.send(Release{publish->export_id, true, publish->readiness_event}, 10000)) {
      return 12;
    }
    steps.send('r');
  }
  return 0;
}

template <class Check>
void IpcReleaseProtocol::sweep_taking_releases(Check check) {
  const PeerId peer = fork_importer(importer_, release_each_with_an_event);
  ASSERT_NE(peer, 0u);
  Tensor tensor = test::allocate(*pool_, {16});
  ASSERT_TRUE(tensor.set_readiness_stream(fake().create_stream(0)));
  for (std::uint64_t skip = 0;; ++skip) {
    ASSERT_TRUE(importer_.steps().send('p'));
    ASSERT_TRUE(exporter_->publish(peer, tensor).has_value());
    ASSERT_EQ(importer_.steps().receive(), 'r');  // the Release is in the socket
    bool threw = false;
    std::uint64_t failed = 0;
    {
      test::FailingAllocations failing(skip);
      try {
        (void)exporter_->poll();
      } catch (...) {
        threw = true;
      }
      failed = failing.failed();
    }
    check(peer, skip, threw);
    if (HasFatalFailure() || failed == 0) {
      break;
    }
  }
  tensor = Tensor();
  ASSERT_TRUE(importer_.steps().send('x'));
  EXPECT_EQ(importer_.reap(), 0);
  ASSERT_TRUE(test::poll_until(*exporter_, [&] { return exporter_->held() == 0; }));
  EXPECT_EQ(pool_->available_blocks(), blocks_);
}

TEST_F(IpcReleaseProtocol, OutOfMemoryTakingAReleaseThrowsNothingAndLosesNoClaim) {
  sweep_taking_releases([&](PeerId peer, std::uint64_t skip, bool threw) {
    ASSERT_FALSE(threw) << "an exception escaped poll at allocation " << skip;
    ASSERT_TRUE(test::poll_until(*exporter_, [&] { return exporter_->stats().releases > skip; }));
    EXPECT_TRUE(exporter_->connected(peer)) << "allocation " << skip;
  });
}

// Out of memory for a moment while a Release is taken (its event unopened for want of host
// memory): once memory is back, the claim drops as soon as the event completes, while the
// importer lives on; it is never held until the importer exits.
TEST_F(IpcReleaseProtocol, OutOfMemoryOpeningAReleaseEventDropsTheClaimOnceMemoryIsBack) {
  sweep_taking_releases([&](PeerId, std::uint64_t skip, bool threw) {
    ASSERT_FALSE(threw) << "an exception escaped poll at allocation " << skip;
    ASSERT_TRUE(test::poll_until(*exporter_, [&] { return exporter_->held() == 0; }))
        << "a claim outlived its completed release event at allocation " << skip;
    EXPECT_EQ(exporter_->stats().unopenable_events, 0u) << "allocation " << skip;
  });
}

// CUDA out of memory opening a release event is as passing as the heap's: the claim drops once the
// event opens and completes, while the importer lives on, not when it exits.
TEST_F(IpcReleaseProtocol, CudaOutOfMemoryOpeningAReleaseEventIsTriedAgain) {
  const PeerId peer = fork_importer(importer_, release_each_with_an_event);
  ASSERT_NE(peer, 0u);
  Tensor tensor = test::allocate(*pool_, {16});
  ASSERT_TRUE(tensor.set_readiness_stream(fake().create_stream(0)));
  ipc().fail_next(CudaIpcEntry::kIpcOpenEventHandle, cudaErrorMemoryAllocation);
  ASSERT_TRUE(importer_.steps().send('p'));
  ASSERT_TRUE(exporter_->publish(peer, tensor).has_value());
  ASSERT_EQ(importer_.steps().receive(), 'r');
  tensor = Tensor();
  ASSERT_TRUE(test::poll_until(*exporter_, [&] { return exporter_->held() == 0; }))
      << "the claim waits for the importer's exit";
  EXPECT_EQ(exporter_->stats().unopenable_events, 0u);
  ASSERT_TRUE(importer_.steps().send('x'));
  EXPECT_EQ(importer_.reap(), 0);
}

// Takes one Publish, then sends a second Hello whose descriptor is no pidfd (its proof fails),
// then the export's Release; lives until the test lets it exit.
int false_hello_then_release(Channel& channel, test::Steps& steps) {
  const auto publish = test::next_publish(channel);
  if (!publish) {
    return 11;
  }
  int pipe_ends[2] = {-1, -1};
  if (::pipe(pipe_ends) != 0) {
    return 12;
  }
  const UniqueFd read_end(pipe_ends[0]);
  const UniqueFd write_end(pipe_ends[1]);
  const Message hello{Hello{static_cast<std::uint32_t>(::getpid()), kProtocolVersion, UniqueFd()}};
  if (!test::send_raw(channel.fd(), test::raw_frame(hello), {read_end.get()}) ||
      !channel.send(Release{publish->export_id, false, {}}, 10000)) {
    return 13;
  }
  steps.send('r');
  return steps.receive() == 'x' ? 0 : 14;
}

// A Hello whose proof fails (kPermissionDenied from the channel, the record consumed) is a
// malformed message like any other: refused, and the peer's later Releases are still read. The
// exporter took it for a broken socket and closed the peer: its Release went unread and the
// claim was held until the importer exited.
TEST_F(IpcReleaseProtocol, AHelloWhoseProofFailsAfterTheHandshakeIsRefusedAndThePeerStays) {
  const PeerId peer = fork_importer(importer_, false_hello_then_release);
  ASSERT_NE(peer, 0u);
  ASSERT_TRUE(exporter_->publish(peer, test::allocate(*pool_, {16})).has_value());
  ASSERT_EQ(importer_.steps().receive(), 'r');
  EXPECT_TRUE(test::poll_until(*exporter_, [&] { return exporter_->held() == 0; }))
      << "the Release after the refused Hello was never read";
  EXPECT_EQ(exporter_->stats().refused_messages, 1u);
  EXPECT_EQ(exporter_->stats().releases, 1u);
  EXPECT_TRUE(exporter_->connected(peer));
  EXPECT_EQ(pool_->available_blocks(), blocks_);
  ASSERT_TRUE(importer_.steps().send('x'));
  EXPECT_EQ(importer_.reap(), 0);
}

}  // namespace
}  // namespace holoscan::ipc
