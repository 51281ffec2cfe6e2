// Covers one import per export per connection: a second import of an export held here (the
// low-level import_tensor given the same descriptor, or an exporter that publishes an id twice),
// one given back already, one out of publish order and one naming another exporter process are
// refused with the exact error and give nothing back, so that the import holding the export keeps
// the exporter's claim: its Release is the only one, sent when it goes.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include "holoscan/ipc.hpp"
#include "holoscan/tensor_pool.hpp"
#include "ipc/import/ipc_admissions.hpp"
#include "support/admissions_script.hpp"
#include "support/allocation_hooks.hpp"
#include "support/fake_cuda_ipc.hpp"
#include "support/gtest_printers.hpp"
#include "support/ipc_peers.hpp"
#include "support/ipc_raw_socket.hpp"

namespace holoscan::ipc {
namespace {

using test::CudaIpcEntry;

class IpcImportOnce : public ::testing::Test {
 protected:
  void SetUp() override {
    fds_before_ = test::open_fd_count();
    pool_ = test::make_device_pool(1024, 2, test::PoolKind::kShareable);
    ASSERT_NE(pool_, nullptr);
    link_ = test::raw_exporter_link();
    ASSERT_TRUE(link_.raw && link_.importer);
    tensor_ = test::allocate(*pool_, {8});
  }
  void TearDown() override {
    link_ = test::RawExporterLink{};
    tensor_ = Tensor();
    pool_.reset();
    scope_.reset();
    EXPECT_EQ(test::open_fd_count(), fds_before_) << "descriptor leak";
  }

  Channel& raw() { return *link_.raw; }
  Importer& importer() { return *link_.importer; }

  // The test's tensor as export `export_id`, as the exporter's low-level export makes it.
  TensorDescriptor descriptor(std::uint64_t export_id) {
    auto exported = export_tensor(tensor_, export_id);
    EXPECT_TRUE(exported.has_value()) << exported.error().message;
    return exported ? exported->descriptor() : TensorDescriptor{};
  }

  // Sends export `export_id` as a Publish, with the allocation's fd when `with_fd`.
  void publish(std::uint64_t export_id, bool with_fd) {
    auto exported = export_tensor(tensor_, export_id);
    ASSERT_TRUE(exported.has_value()) << exported.error().message;
    auto bytes = encode(exported->descriptor());
    ASSERT_TRUE(bytes.has_value());
    UniqueFd fd(with_fd ? ::fcntl(exported->fd(), F_DUPFD_CLOEXEC, 0) : -1);
    ASSERT_TRUE(raw().send(Publish{std::move(*bytes), std::move(fd)}, 1000).has_value());
  }

  // The next Release the exporter's end reads within `timeout_ms`, if any.
  std::optional<Release> next_release(int timeout_ms) {
    auto got = raw().receive(timeout_ms);
    EXPECT_TRUE(got.has_value()) << got.error().message;
    if (!got || !*got) {
      return std::nullopt;
    }
    EXPECT_TRUE(std::holds_alternative<Release>(**got)) << "an importer sends only Releases";
    return std::holds_alternative<Release>(**got) ? std::optional<Release>(std::get<Release>(**got))
                                                  : std::nullopt;
  }

  // Drops `held` and checks that export `export_id` comes back once, as imported and done.
  void expect_one_release(Tensor& held, std::uint64_t export_id) {
    EXPECT_FALSE(next_release(100)) << "given back while an import held it";
    const std::size_t outstanding = importer().outstanding();
    held = Tensor();
    auto release = next_release(1000);
    ASSERT_TRUE(release) << "the import's Release never came";
    EXPECT_EQ(release->export_id, export_id);
    EXPECT_FALSE(release->refused);
    EXPECT_FALSE(next_release(100)) << "more than one Release for one export";
    EXPECT_EQ(importer().outstanding(), outstanding - 1);
  }

  test::FakeCudaIpc& ipc() { return scope_->ipc(); }

  int fds_before_ = 0;
  std::optional<test::FakeCudaIpcScope> scope_{std::in_place};
  std::shared_ptr<TensorPool> pool_;
  test::RawExporterLink link_;
  Tensor tensor_;
};

const std::string kHeldAlready =
    " is imported here already (one import per export: the first one's Release would end the "
    "exporter's claim under the second)";

TEST_F(IpcImportOnce, ASecondImportOfAHeldExportIsRefusedAndGivesNothingBack) {
  publish(7, true);
  Tensor first = test::receive_one(importer());
  ASSERT_TRUE(static_cast<bool>(first));

  auto again = import_tensor(descriptor(7), UniqueFd(), importer());
  ASSERT_FALSE(again.has_value()) << "the same export imported twice";
  EXPECT_EQ(again.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(again.error().message, "ipc import: export 7" + kHeldAlready);
  EXPECT_EQ(importer().stats().refused, 1u);
  EXPECT_EQ(importer().stats().released, 0u);
  EXPECT_EQ(importer().outstanding(), 1u);
  expect_one_release(first, 7);
}

TEST_F(IpcImportOnce, AnExportPublishedTwiceIsRefusedWhileTheFirstImportHoldsIt) {
  publish(7, true);
  Tensor first = test::receive_one(importer());
  ASSERT_TRUE(static_cast<bool>(first));
  publish(7, false);
  auto again = importer().receive(1000);
  ASSERT_FALSE(again.has_value()) << "a repeated Publish imported";
  EXPECT_EQ(again.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(again.error().message, "ipc import: export 7" + kHeldAlready);
  expect_one_release(first, 7);

  // The connection goes on.
  publish(8, false);
  Tensor next = test::receive_one(importer());
  EXPECT_TRUE(static_cast<bool>(next)) << "the channel did not go on";
  expect_one_release(next, 8);
}

TEST_F(IpcImportOnce, AnExportGivenBackIsNotImportedAgain) {
  publish(7, true);
  Tensor first = test::receive_one(importer());
  ASSERT_TRUE(static_cast<bool>(first));
  expect_one_release(first, 7);

  auto again = import_tensor(descriptor(7), UniqueFd(), importer());
  ASSERT_FALSE(again.has_value()) << "imported memory whose claim had ended";
  EXPECT_EQ(again.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(again.error().message,
            "ipc import: export 7 is not held here: it was given back or refused already, or came "
            "out of publish order");
  EXPECT_FALSE(next_release(100)) << "a Release for an export given back already";
  EXPECT_EQ(importer().outstanding(), 0u);
}

TEST_F(IpcImportOnce, AnExportOutOfPublishOrderIsRefused) {
  publish(9, true);
  Tensor later = test::receive_one(importer());
  ASSERT_TRUE(static_cast<bool>(later));
  publish(8, false);
  auto earlier = importer().receive(1000);
  ASSERT_FALSE(earlier.has_value());
  EXPECT_EQ(earlier.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(earlier.error().message,
            "ipc import: export 8 is not held here: it was given back or refused already, or came "
            "out of publish order");
  expect_one_release(later, 9);
}

TEST_F(IpcImportOnce, ADescriptorOfAnotherExporterProcessIsRefusedAndMapsNothing) {
  TensorDescriptor foreign = descriptor(7);
  const auto self = static_cast<std::uint32_t>(::getpid());
  foreign.exporter_pid = self + 1;
  const int fd = ::fcntl(export_tensor(tensor_, 7)->fd(), F_DUPFD_CLOEXEC, 0);
  auto imported = import_tensor(foreign, UniqueFd(fd), importer());
  ASSERT_FALSE(imported.has_value()) << "imported another exporter's memory";
  EXPECT_EQ(imported.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(imported.error().message,
            "ipc import: export 7 names exporter process " + std::to_string(self + 1) +
                ", not this connection's exporter (process " + std::to_string(self) + ")");
  EXPECT_EQ(::fcntl(fd, F_GETFD), -1) << "the descriptor that came with it was not closed";
  EXPECT_EQ(ipc().calls(CudaIpcEntry::kMemImportFromShareableHandle), 0u) << "it was mapped";
  EXPECT_FALSE(next_release(100)) << "another exporter's export given back to this one";

  // The refusal took nothing from this exporter's export 7.
  publish(7, true);
  Tensor own = test::receive_one(importer());
  EXPECT_TRUE(static_cast<bool>(own));
  expect_one_release(own, 7);
}

TEST_F(IpcImportOnce, ThreadsImportingOneExportAtOnceMakeOneImport) {
  publish(7, true);  // maps the allocation, so that the threads below import without an fd
  Tensor mapped = test::receive_one(importer());
  ASSERT_TRUE(static_cast<bool>(mapped));
  constexpr int kThreads = 8;
  const TensorDescriptor d = descriptor(8);
  std::vector<expected<Tensor, Error>> results(kThreads, make_unexpected(Error{}));
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] { results[t] = import_tensor(d, UniqueFd(), importer()); });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  int imported = 0;
  for (auto& result : results) {
    if (result) {
      ++imported;
    } else {
      EXPECT_EQ(result.error().message, "ipc import: export 8" + kHeldAlready);
    }
  }
  EXPECT_EQ(imported, 1);
  results.clear();  // the one import goes: its Release is the only one for export 8
  auto release = next_release(1000);
  ASSERT_TRUE(release);
  EXPECT_EQ(release->export_id, 8u);
  EXPECT_FALSE(next_release(100)) << "more than one Release for export 8";
  expect_one_release(mapped, 7);
}

TEST_F(IpcImportOnce, ExportIdZeroNamesNoExport) {
  auto imported = import_tensor(descriptor(0), UniqueFd(), importer());
  ASSERT_FALSE(imported.has_value());
  EXPECT_EQ(imported.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(imported.error().message,
            "ipc import: export id 0 names no export (exporters number them from 1)");
  EXPECT_FALSE(next_release(100));
}

TEST_F(IpcImportOnce, AChannelRefusedRepeatOfAHeldExportGivesNothingBack) {
  publish(7, true);
  Tensor first = test::receive_one(importer());
  ASSERT_TRUE(static_cast<bool>(first));
  // Export 7 again with two descriptors: the channel refuses it before it is decoded.
  auto bytes = encode(descriptor(7));
  ASSERT_TRUE(bytes.has_value());
  UniqueFd a(::memfd_create("holoscan-ipc-test", MFD_CLOEXEC));
  UniqueFd b(::memfd_create("holoscan-ipc-test", MFD_CLOEXEC));
  ASSERT_TRUE(
      test::send_raw(raw().fd(), test::raw_frame(Publish{*bytes, UniqueFd()}), {a.get(), b.get()}));
  auto again = importer().receive(1000);
  ASSERT_FALSE(again.has_value());
  EXPECT_EQ(again.error().message,
            "ipc channel: publish of export 7 carries 2 file descriptors, its handle kind takes 0 "
            "or 1");
  EXPECT_EQ(importer().outstanding(), 1u) << "the held import was counted as given back";
  expect_one_release(first, 7);
}

// Runs `before()`, then `attempt()` with each of its allocations failing in turn (and last with
// none failing): it must never throw and must refuse every time (return false).
template <class Before, class Attempt>
void expect_refused_whatever_allocation_fails(Before before, Attempt attempt, const char* call) {
  for (std::uint64_t skip = 0;; ++skip) {
    before();
    bool threw = false;
    bool refused = false;
    std::uint64_t failed = 0;
    {
      test::FailingAllocations failing(skip);
      try {
        refused = !attempt();
      } catch (...) {
        threw = true;
      }
      failed = failing.failed();
    }
    ASSERT_FALSE(threw) << "an exception escaped " << call << " at allocation " << skip;
    EXPECT_TRUE(refused) << "allocation " << skip << ": " << call << " imported the repeat";
    if (failed == 0) {
      break;
    }
  }
}

// Every allocation of a refused repeat failing in turn: nothing throws, nothing is given back.
TEST_F(IpcImportOnce, ARefusedRepeatOutOfMemoryNeverThrowsAndGivesNothingBack) {
  publish(7, true);
  Tensor first = test::receive_one(importer());
  ASSERT_TRUE(static_cast<bool>(first));
  const TensorDescriptor d = descriptor(7);
  expect_refused_whatever_allocation_fails(
      [] {}, [&] { return import_tensor(d, UniqueFd(), importer()).has_value(); }, "import_tensor");
  expect_refused_whatever_allocation_fails(
      [&] { publish(7, false); }, [&] { return importer().receive(1000).has_value(); }, "receive");
  EXPECT_EQ(importer().outstanding(), 1u);
  expect_one_release(first, 7);
}

// A caller's import with an id far ahead of the exporter's, refused, must not make the exporter's
// own later Publishes look seen.
TEST_F(IpcImportOnce, ARefusedImportAheadOfTheChannelLeavesLaterPublishesImportable) {
  auto ahead = import_tensor(descriptor(1000), UniqueFd(), importer());
  ASSERT_FALSE(ahead.has_value()) << "imported an allocation it never mapped";
  auto release = next_release(1000);
  ASSERT_TRUE(release) << "the refusal was not given back";
  EXPECT_EQ(release->export_id, 1000u);
  EXPECT_TRUE(release->refused);
  publish(7, true);
  Tensor own = test::receive_one(importer());
  EXPECT_TRUE(static_cast<bool>(own)) << "the exporter's Publish after it was refused";
  expect_one_release(own, 7);
}

// A descriptor imported ahead of its Publish (another route), then given back: when the Publish
// comes, it is refused, and given back again: an exporter whose claim the first Release ended
// ignores it, and one that held no claim then (the first Release came before its Publish) drops
// the claim now. The allocation's mapping stays, so the Release is not a refusal, which would
// have the exporter count the mapping let go.
TEST_F(IpcImportOnce, AnExportImportedAheadOfItsPublishIsNotImportedAgainFromTheChannel) {
  publish(7, true);  // maps the allocation
  Tensor mapped = test::receive_one(importer());
  ASSERT_TRUE(static_cast<bool>(mapped));
  auto ahead = import_tensor(descriptor(9), UniqueFd(), importer());
  ASSERT_TRUE(ahead.has_value()) << ahead.error().message;
  expect_one_release(*ahead, 9);
  // The caller's own second import of it is refused and gives nothing back.
  auto twice = import_tensor(descriptor(9), UniqueFd(), importer());
  ASSERT_FALSE(twice.has_value());
  EXPECT_EQ(twice.error().message,
            "ipc import: export 9 is not held here: it was given back or refused already, or came "
            "out of publish order");
  EXPECT_FALSE(next_release(100)) << "a caller's refused import gave export 9 back again";
  publish(9, false);
  auto again = importer().receive(1000);
  ASSERT_FALSE(again.has_value()) << "imported an export whose claim had ended";
  EXPECT_EQ(again.error().message,
            "ipc import: export 9 was given back or refused here before this connection's "
            "exporter published it (an import_tensor of it): refused, and given back again");
  auto second = next_release(1000);
  ASSERT_TRUE(second) << "the refused Publish was not given back";
  EXPECT_EQ(second->export_id, 9u);
  EXPECT_FALSE(second->refused) << "the exporter would count the kept mapping let go";
  EXPECT_FALSE(next_release(100)) << "a third Release for export 9";
  publish(10, false);
  Tensor next = test::receive_one(importer());
  EXPECT_TRUE(static_cast<bool>(next)) << "the channel did not go on";
  expect_one_release(next, 10);
  expect_one_release(mapped, 7);
}

TEST(IpcAdmissions, TheChannelsOrderAndTheExportsFinishedAheadOfItAreSeen) {
  detail::Admissions admissions;
  using Verdict = detail::Admissions::Verdict;
  EXPECT_EQ(admissions.verdict(0), Verdict::kNoExport);
  admissions.carried(5);
  EXPECT_EQ(admissions.verdict(3), Verdict::kSeen) << "below the channel's order";
  EXPECT_EQ(admissions.verdict(6), Verdict::kNew);
  admissions.hold(6);
  EXPECT_EQ(admissions.verdict(6), Verdict::kHeld);
  EXPECT_EQ(admissions.held(), 1u);
  admissions.finish(6);
  EXPECT_EQ(admissions.held(), 0u);
  EXPECT_EQ(admissions.verdict(6), Verdict::kFinishedAhead) << "finished ahead of the channel";
  EXPECT_EQ(admissions.verdict(7), Verdict::kNew) << "a finished id says nothing of the next";
  admissions.carried(10);
  EXPECT_EQ(admissions.verdict(6), Verdict::kSeen);
  EXPECT_EQ(admissions.verdict(11), Verdict::kNew);
}

TEST(IpcAdmissions, MoreExportsFinishedAheadThanRememberedFoldTheOldestIntoAFloor) {
  detail::Admissions admissions;
  using Verdict = detail::Admissions::Verdict;
  const std::uint64_t first = 1001;
  for (std::uint64_t id = first; id <= first + detail::kRememberedAhead; ++id) {
    ASSERT_EQ(admissions.verdict(id), Verdict::kNew) << id;
    admissions.hold(id);
    admissions.finish(id);
  }
  for (std::uint64_t id = first; id <= first + detail::kRememberedAhead; ++id) {
    EXPECT_EQ(admissions.verdict(id), Verdict::kFinishedAhead) << id << " imported again";
  }
  EXPECT_EQ(admissions.verdict(first - 1), Verdict::kFinishedAhead) << "below the floor";
  admissions.carried(first + 10);
  EXPECT_EQ(admissions.verdict(first - 1), Verdict::kSeen) << "below the channel's order";
  EXPECT_EQ(admissions.verdict(first + detail::kRememberedAhead + 1), Verdict::kNew);
}

// Seeded scripts of the admissions fuzzer's kind, shaped as a connection sees them: the channel's
// ids climbing in small steps, imports aside up to beyond what the record remembers ahead,
// give-backs of recent ids. The model checks every verdict (support/admissions_script.hpp).
TEST(IpcAdmissions, SeededScriptsNeverAdmitAnExportTwiceAndAgreeWithTheModel) {
  constexpr std::size_t kSteps = 4000;
  for (std::uint64_t seed = 1; seed <= 64; ++seed) {
    std::mt19937_64 random(seed);
    std::vector<std::uint8_t> script;
    std::uint64_t channel = 0;
    const std::uint64_t reach = seed % 2 == 0 ? 40 : detail::kRememberedAhead + 60;
    for (std::size_t i = 0; i < kSteps; ++i) {
      const auto step = static_cast<std::uint8_t>(random() % 4);
      std::uint64_t id = 0;
      if (step == 0 || step == 3) {
        channel = (channel + random() % 3) % (3 * detail::kRememberedAhead);
        id = channel;
      } else {
        id = (channel + random() % reach) % (3 * detail::kRememberedAhead);
      }
      script.push_back(static_cast<std::uint8_t>(step | (random() % 97 == 0 ? 0x80 : 0)));
      script.push_back(static_cast<std::uint8_t>(id >> 8));
      script.push_back(static_cast<std::uint8_t>(id & 0xff));
    }
    const std::string broken = holoscan_test::run_admissions_script(script.data(), script.size());
    EXPECT_EQ(broken, "") << "seed " << seed;
  }
}

}  // namespace
}  // namespace holoscan::ipc
