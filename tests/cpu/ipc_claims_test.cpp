// Covers the export ledger with fake release events and fake liveness: when each claim drops,
// that a peer cannot release another's claim, refusals that leak nothing, and concurrent use.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

#include "holoscan/ipc/claims.hpp"
#include "support/allocation_hooks.hpp"
#include "support/gtest_printers.hpp"
#include "support/ipc_fakes.hpp"

namespace holoscan::ipc {
namespace {

using test::fake_event;
using test::fake_liveness;
using test::make_flag;

// Counts drops per export id; a claim that drops twice shows as 2.
class Drops {
 public:
  ExportLedger::DropClaim claim(std::uint64_t id) {
    return [this, id] { ++count_[id]; };
  }
  int of(std::uint64_t id) const { return count_[id].load(); }

 private:
  mutable std::atomic<int> count_[16] = {};
};

TEST(IpcLedger, ReleaseWithoutEventDropsAtNextPoll) {
  Drops drops;
  ExportLedger ledger;
  ASSERT_TRUE(ledger.add(1, 5, drops.claim(5)));
  EXPECT_EQ(ledger.held(), 1u);
  EXPECT_EQ(ledger.poll(), 0u);
  EXPECT_TRUE(ledger.on_release(1, 5, nullptr));
  EXPECT_EQ(drops.of(5), 0) << "drops happen in poll(), not in on_release()";
  EXPECT_EQ(ledger.poll(), 1u);
  EXPECT_EQ(drops.of(5), 1);
  EXPECT_EQ(ledger.held(), 0u);
}

// A drop that forks (a producer's deleter that poll() runs): the child's copy of poll() went on
// to run the rest of the batch's drops, so those producers saw their deleters run twice, once in
// each process. The child now leaves them to the parent.
TEST(IpcLedger, AForkFromOneDropRunsNoOtherDropOfItsBatchInTheChild) {
  ExportLedger ledger;
  const pid_t parent = ::getpid();
  pid_t child = -1;
  int ran = 0;
  int ran_in_child = 0;
  const auto drop = [&] {
    if (::getpid() != parent) {
      ++ran_in_child;  // the child's copy of a drop the parent runs too
      return;
    }
    ++ran;
    if (child < 0) {
      child = ::fork();  // in the child, poll() goes on with the rest of its batch
    }
  };
  for (std::uint64_t id = 1; id <= 3; ++id) {
    ASSERT_TRUE(ledger.add(1, id, drop));
    ASSERT_TRUE(ledger.on_release(1, id, nullptr));
  }
  const std::size_t dropped = ledger.poll();
  if (::getpid() != parent) {
    ::_exit(ran_in_child == 0 ? 0 : 1);
  }
  EXPECT_EQ(dropped, 3u);
  EXPECT_EQ(ran, 3) << "the parent runs every drop of its batch";
  ASSERT_GT(child, 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child ran drops of the parent's batch";
}

TEST(IpcLedger, ReleaseWaitsForItsEvent) {
  Drops drops;
  ExportLedger ledger;
  ASSERT_TRUE(ledger.add(1, 5, drops.claim(5)));
  const auto done = make_flag();
  EXPECT_TRUE(ledger.on_release(1, 5, fake_event(done)));
  EXPECT_EQ(ledger.poll(), 0u);
  EXPECT_EQ(drops.of(5), 0);
  *done = true;
  EXPECT_EQ(ledger.poll(), 1u);
  EXPECT_EQ(drops.of(5), 1);
  EXPECT_EQ(ledger.poll(), 0u);
  EXPECT_EQ(drops.of(5), 1);
}

TEST(IpcLedger, UnknownAndDuplicateReleasesAreCountedAndIgnored) {
  Drops drops;
  ExportLedger ledger;
  ASSERT_TRUE(ledger.add(1, 5, drops.claim(5)));
  const auto never = make_flag();
  EXPECT_FALSE(ledger.on_release(1, 6, nullptr));  // unknown export
  EXPECT_FALSE(ledger.on_release(9, 5, nullptr));  // unknown peer
  EXPECT_TRUE(ledger.on_release(1, 5, fake_event(never)));
  EXPECT_FALSE(ledger.on_release(1, 5, nullptr)) << "a second release must not skip the event";
  EXPECT_EQ(ledger.ignored_releases(), 3u);
  EXPECT_EQ(ledger.poll(), 0u);
  EXPECT_EQ(drops.of(5), 0);
}

TEST(IpcLedger, UncheckableReleaseHoldsTheClaimUntilThePeerExits) {
  Drops drops;
  ExportLedger ledger;
  ASSERT_TRUE(ledger.add(1, 5, drops.claim(5)));
  EXPECT_FALSE(ledger.on_uncheckable_release(1, 6)) << "unknown export";
  EXPECT_TRUE(ledger.on_uncheckable_release(1, 5));
  EXPECT_EQ(ledger.poll(), 0u);
  EXPECT_FALSE(ledger.on_release(1, 5, nullptr)) << "released already: a protocol error";
  EXPECT_FALSE(ledger.on_uncheckable_release(1, 5));
  EXPECT_EQ(ledger.ignored_releases(), 3u);
  const auto exited = make_flag();
  EXPECT_EQ(ledger.on_peer_closed(1, fake_liveness(exited)), 1u);
  EXPECT_EQ(ledger.poll(), 0u) << "hung up, but its process still runs";
  EXPECT_EQ(drops.of(5), 0);
  *exited = true;
  EXPECT_EQ(ledger.poll(), 1u);
  EXPECT_EQ(drops.of(5), 1);
}

TEST(IpcLedger, APeerCannotReleaseAnotherPeersClaim) {
  Drops drops;
  ExportLedger ledger;
  ASSERT_TRUE(ledger.add(1, 5, drops.claim(5)));
  ASSERT_TRUE(ledger.add(2, 6, drops.claim(6)));
  EXPECT_FALSE(ledger.on_release(2, 5, nullptr));
  EXPECT_EQ(ledger.poll(), 0u);
  EXPECT_EQ(drops.of(5), 0);
  EXPECT_EQ(ledger.held(1), 1u);
  EXPECT_EQ(ledger.held(2), 1u);
  EXPECT_EQ(ledger.ignored_releases(), 1u);
}

TEST(IpcLedger, TheSameExportIdMayBeHeldForTwoPeers) {
  Drops drops;
  ExportLedger ledger;
  ASSERT_TRUE(ledger.add(1, 5, drops.claim(5)));
  ASSERT_TRUE(ledger.add(2, 5, drops.claim(5)));
  EXPECT_TRUE(ledger.on_release(2, 5, nullptr));
  EXPECT_EQ(ledger.poll(), 1u);
  EXPECT_EQ(ledger.held(1), 1u);
  EXPECT_EQ(ledger.held(2), 0u);
}

TEST(IpcLedger, RefusedAddDropsTheClaimAtOnce) {
  Drops drops;
  ExportLedger ledger;
  ASSERT_TRUE(ledger.add(1, 5, drops.claim(5)));
  auto again = ledger.add(1, 5, drops.claim(6));
  ASSERT_FALSE(again.has_value());
  EXPECT_EQ(again.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(again.error().message, "ipc ledger: export 5 is already held for peer 1");
  EXPECT_EQ(drops.of(6), 1);
  EXPECT_EQ(drops.of(5), 0);

  EXPECT_EQ(ledger.on_peer_closed(1, fake_liveness(make_flag())), 1u);
  auto late = ledger.add(1, 7, drops.claim(7));
  ASSERT_FALSE(late.has_value());
  EXPECT_EQ(late.error().message, "ipc ledger: peer 1 has hung up");
  EXPECT_EQ(drops.of(7), 1);
}

// A peer stays refused after its entry is gone: closed with no claims, or once every claim it
// held has dropped. A claim taken for it then would be held until the ledger's end.
TEST(IpcLedger, APeerThatHungUpIsRefusedForGood) {
  Drops drops;
  ExportLedger ledger;
  EXPECT_EQ(ledger.on_peer_closed(1, nullptr), 0u);  // closed before any export
  auto never_held = ledger.add(1, 1, drops.claim(1));
  ASSERT_FALSE(never_held.has_value());
  EXPECT_EQ(never_held.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(never_held.error().message, "ipc ledger: peer 1 has hung up");
  EXPECT_EQ(drops.of(1), 1);

  ASSERT_TRUE(ledger.add(2, 2, drops.claim(2)));
  EXPECT_EQ(ledger.on_peer_closed(2, nullptr), 1u);
  EXPECT_EQ(ledger.poll(), 1u);  // its last claim drops and its entry goes
  auto after_drops = ledger.add(2, 3, drops.claim(3));
  ASSERT_FALSE(after_drops.has_value());
  EXPECT_EQ(after_drops.error().message, "ipc ledger: peer 2 has hung up");
  EXPECT_EQ(drops.of(3), 1);
  EXPECT_EQ(ledger.held(), 0u);
  EXPECT_EQ(ledger.held(2), 0u);

  ASSERT_TRUE(ledger.add(3, 4, drops.claim(4))) << "other peers are not affected";
}

TEST(IpcLedger, ClosedPeerClaimsWaitForEventsThenForExit) {
  Drops drops;
  ExportLedger ledger;
  ASSERT_TRUE(ledger.add(1, 1, drops.claim(1)));  // released, event pending
  ASSERT_TRUE(ledger.add(1, 2, drops.claim(2)));  // never released
  ASSERT_TRUE(ledger.add(1, 3, drops.claim(3)));  // released, no event
  const auto done = make_flag();
  const auto exited = make_flag();
  ASSERT_TRUE(ledger.on_release(1, 1, fake_event(done)));
  ASSERT_TRUE(ledger.on_release(1, 3, nullptr));
  EXPECT_EQ(ledger.on_peer_closed(1, fake_liveness(exited)), 3u);

  EXPECT_EQ(ledger.poll(), 1u);
  EXPECT_EQ(drops.of(3), 1);
  *done = true;
  EXPECT_EQ(ledger.poll(), 1u);
  EXPECT_EQ(drops.of(1), 1);
  EXPECT_EQ(drops.of(2), 0) << "a live peer may still map what it never released";
  *exited = true;
  EXPECT_EQ(ledger.poll(), 1u);
  EXPECT_EQ(drops.of(2), 1);
  EXPECT_EQ(ledger.held(), 0u);
}

TEST(IpcLedger, ExitedPeerDoesNotWaitForItsEvents) {
  Drops drops;
  ExportLedger ledger;
  ASSERT_TRUE(ledger.add(1, 1, drops.claim(1)));
  ASSERT_TRUE(ledger.add(1, 2, drops.claim(2)));
  ASSERT_TRUE(ledger.on_release(1, 1, fake_event(make_flag())));  // never completes
  const auto exited = make_flag();
  ledger.on_peer_closed(1, fake_liveness(exited));
  EXPECT_EQ(ledger.poll(), 0u);
  *exited = true;
  EXPECT_EQ(ledger.poll(), 2u);
  EXPECT_EQ(drops.of(1), 1);
  EXPECT_EQ(drops.of(2), 1);
}

TEST(IpcLedger, NullLivenessMeansGoneAlready) {
  Drops drops;
  ExportLedger ledger;
  ASSERT_TRUE(ledger.add(4, 1, drops.claim(1)));
  EXPECT_EQ(ledger.on_peer_closed(4, nullptr), 1u);
  EXPECT_EQ(ledger.poll(), 1u);
  EXPECT_EQ(drops.of(1), 1);
  EXPECT_EQ(ledger.on_peer_closed(4, nullptr), 0u) << "the peer is forgotten once empty";
}

TEST(IpcLedger, OpenPeerIsNeverDroppedForLiveness) {
  Drops drops;
  ExportLedger ledger;
  ASSERT_TRUE(ledger.add(1, 1, drops.claim(1)));
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(ledger.poll(), 0u);
  }
  EXPECT_EQ(drops.of(1), 0);
}

TEST(IpcLedger, DestructorDropsWhatIsLeft) {
  Drops drops;
  {
    ExportLedger ledger;
    ASSERT_TRUE(ledger.add(1, 1, drops.claim(1)));
    ASSERT_TRUE(ledger.add(2, 2, drops.claim(2)));
    ASSERT_TRUE(ledger.on_release(2, 2, fake_event(make_flag())));
  }
  EXPECT_EQ(drops.of(1), 1);
  EXPECT_EQ(drops.of(2), 1);
}

// Out of memory while the destructor collects the claims, each still drops: a claim destroyed
// without its drop would free memory a live peer may still read.
TEST(IpcLedger, DestructorOutOfMemoryStillDropsEveryClaim) {
  for (std::uint64_t skip = 0;; ++skip) {
    Drops drops;
    std::optional<ExportLedger> ledger(std::in_place);
    for (std::uint64_t id = 1; id <= 6; ++id) {
      ASSERT_TRUE(ledger->add(id % 3, id, drops.claim(id)));
    }
    std::uint64_t failed = 0;
    {
      test::FailingAllocations failing(skip);
      ledger.reset();
      failed = failing.failed();
    }
    for (std::uint64_t id = 1; id <= 6; ++id) {
      EXPECT_EQ(drops.of(id), 1) << "export " << id << ", allocation " << skip << " failing";
    }
    if (failed == 0) {
      break;
    }
  }
}

// Out of memory in poll(), every claim due is dropped exactly once, then or at the next poll().
TEST(IpcLedger, PollOutOfMemoryLosesNoClaim) {
  for (std::uint64_t skip = 0;; ++skip) {
    Drops drops;
    ExportLedger ledger;
    for (std::uint64_t id = 1; id <= 6; ++id) {
      ASSERT_TRUE(ledger.add(id % 3, id, drops.claim(id)));
      ASSERT_TRUE(ledger.on_release(id % 3, id, nullptr));
    }
    ledger.on_peer_closed(0, nullptr);
    std::uint64_t failed = 0;
    bool threw = false;
    {
      test::FailingAllocations failing(skip);
      try {
        (void)ledger.poll();
      } catch (...) {
        threw = true;
      }
      failed = failing.failed();
    }
    EXPECT_FALSE(threw) << "allocation " << skip;
    (void)ledger.poll();
    EXPECT_EQ(ledger.held(), 0u) << "allocation " << skip;
    for (std::uint64_t id = 1; id <= 6; ++id) {
      EXPECT_EQ(drops.of(id), 1) << "export " << id << ", allocation " << skip << " failing";
    }
    if (failed == 0) {
      break;
    }
  }
}

TEST(IpcLedger, AThrowingDropDoesNotLoseTheOthers) {
  Drops drops;
  ExportLedger ledger;
  ASSERT_TRUE(ledger.add(1, 1, [] { throw std::runtime_error("drop failed"); }));
  ASSERT_TRUE(ledger.add(1, 2, drops.claim(2)));
  ASSERT_TRUE(ledger.add(1, 3, drops.claim(3)));
  ledger.on_release(1, 1, nullptr);
  ledger.on_release(1, 2, nullptr);
  ledger.on_release(1, 3, nullptr);
  EXPECT_THROW(ledger.poll(), std::runtime_error);
  EXPECT_EQ(drops.of(2), 1);
  EXPECT_EQ(drops.of(3), 1);
  EXPECT_EQ(ledger.held(), 0u);
}

TEST(IpcLedger, ConcurrentPeersDropEachClaimOnce) {
  constexpr int kPeers = 4;
  constexpr int kExports = 500;
  std::atomic<int> dropped{0};
  std::vector<std::atomic<int>> per_claim(kPeers * kExports);
  ExportLedger ledger;
  std::atomic<bool> stop{false};
  std::thread poller([&] {
    while (!stop.load()) {
      ledger.poll();
    }
  });
  std::vector<std::thread> peers;
  for (int p = 0; p < kPeers; ++p) {
    peers.emplace_back([&, p] {
      for (int e = 0; e < kExports; ++e) {
        const int slot = p * kExports + e;
        ASSERT_TRUE(ledger.add(p, e, [&, slot] {
          ++per_claim[slot];
          ++dropped;
        }));
        EXPECT_FALSE(ledger.on_release((p + 1) % kPeers, e + kExports, nullptr));
        EXPECT_TRUE(ledger.on_release(p, e, nullptr));
      }
    });
  }
  for (auto& t : peers) {
    t.join();
  }
  ledger.poll();
  stop = true;
  poller.join();
  ledger.poll();
  EXPECT_EQ(dropped.load(), kPeers * kExports);
  for (const auto& count : per_claim) {
    EXPECT_EQ(count.load(), 1);
  }
  EXPECT_EQ(ledger.ignored_releases(), static_cast<std::uint64_t>(kPeers * kExports));
}

}  // namespace
}  // namespace holoscan::ipc
