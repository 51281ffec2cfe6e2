// Covers publishes an importer must refuse although their descriptor decodes: the wrong number of
// file descriptors, or a descriptor the kernel could not hand over (MSG_CTRUNC, here at the
// process's descriptor limit). Each is reported for what it is and given back at once (a Release
// without event), so that the exporter's claim does not wait for the importer to exit.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "holoscan/ipc.hpp"
#include "holoscan/tensor_pool.hpp"
#include "support/fake_cuda_ipc.hpp"
#include "support/gtest_printers.hpp"
#include "support/ipc_peers.hpp"
#include "support/ipc_raw_socket.hpp"
#include "support/ipc_samples.hpp"

namespace holoscan::ipc {
namespace {

class IpcRefusedPublish : public ::testing::Test {
 protected:
  void SetUp() override { fds_before_ = test::open_fd_count(); }
  void TearDown() override {
    importer_.reset();
    raw_.reset();
    scope_.reset();
    EXPECT_EQ(test::open_fd_count(), fds_before_) << "descriptor leak";
  }

  // An Importer whose exporter is `raw_`, a bare channel end that sends what the test says.
  void connect_raw() {
    test::RawExporterLink link = test::raw_exporter_link();
    ASSERT_TRUE(link.raw && link.importer);
    importer_ = std::move(link.importer);
    raw_ = std::move(link.raw);
  }

  // Expects the Importer to refuse the next publish with `message`, and to give export `id` back.
  void expect_refused_and_given_back(const std::string& message, std::uint64_t id) {
    auto got = importer_->receive(1000);
    ASSERT_FALSE(got.has_value()) << "the publish was imported";
    EXPECT_EQ(got.error().code, ErrorCode::kInvalidArgument);
    EXPECT_EQ(got.error().message, message);
    auto release = raw_->receive(1000);
    ASSERT_TRUE(release && *release) << "no Release came back";
    ASSERT_TRUE(std::holds_alternative<Release>(**release));
    EXPECT_EQ(std::get<Release>(**release).export_id, id);
    EXPECT_FALSE(std::get<Release>(**release).has_event);
  }

  int fds_before_ = 0;
  std::optional<test::FakeCudaIpcScope> scope_{std::in_place};
  std::optional<Channel> raw_;
  std::optional<Importer> importer_;
};

UniqueFd memfd() { return UniqueFd(::memfd_create("holoscan-ipc-test", MFD_CLOEXEC)); }

TEST_F(IpcRefusedPublish, WrongDescriptorCountIsReportedAndGivenBackAtOnce) {
  connect_raw();
  // Exports 7, 8 and 9, as an exporter numbers them (a repeat of a given-back one gets no Release).
  auto frame = [](std::uint64_t export_id) {
    TensorDescriptor d = test::sample_descriptor();
    d.export_id = export_id;
    d.handle_kind = MemoryHandleKind::kPosixFd;
    d.allocation_id = 0;  // the fd must come with every export (none is kept mapped)
    return test::raw_frame(Publish{test::encoded(d), memfd()});
  };
  UniqueFd a = memfd();
  UniqueFd b = memfd();
  ASSERT_TRUE(test::send_raw(raw_->fd(), frame(7), {}));
  expect_refused_and_given_back(
      "ipc channel: publish of export 7 carries 0 file descriptors, its handle kind needs 1", 7);
  ASSERT_TRUE(test::send_raw(raw_->fd(), frame(8), {a.get(), b.get()}));
  expect_refused_and_given_back(
      "ipc channel: publish of export 8 carries 2 file descriptors, its handle kind needs 1", 8);
  ASSERT_TRUE(test::send_raw(raw_->fd(), frame(9), {a.get(), b.get(), a.get(), b.get(), a.get()}));
  expect_refused_and_given_back(
      "ipc channel: publish of export 9: frame carried more file descriptors than any frame may",
      9);
  EXPECT_EQ(importer_->stats().refused, 3u);
  EXPECT_EQ(importer_->stats().released, 3u);
  EXPECT_EQ(importer_->outstanding(), 0u);
}

TEST_F(IpcRefusedPublish, DescriptorTheKernelCouldNotHandOverIsReportedAndGivenBackAtOnce) {
  test::LocalLink link = test::local_link(1);
  ASSERT_TRUE(link.ok());
  auto id = link.exporter->publish(link.peer, test::allocate(*link.pool, {8}));
  ASSERT_TRUE(id.has_value()) << id.error().message;

  expected<std::optional<Tensor>, Error> got = std::optional<Tensor>();
  {
    test::DescriptorLimit no_more_fds;  // the kernel cannot install the pool's fd here
    got = link.importer->receive(1000);
  }
  ASSERT_FALSE(got.has_value()) << "imported without its descriptor";
  EXPECT_EQ(got.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(got.error().message,
            "ipc channel: publish of export " + std::to_string(*id) +
                ": the kernel truncated its file descriptors (MSG_CTRUNC): this process could "
                "not take them, e.g. at its descriptor limit (RLIMIT_NOFILE)");
  EXPECT_EQ(link.importer->stats().refused, 1u);
  EXPECT_EQ(link.importer->stats().released, 1u);
  EXPECT_TRUE(test::poll_until(*link.exporter, [&] { return link.exporter->held() == 0; }))
      << "the claim waits for the importer to exit";
  EXPECT_EQ(link.pool->available_blocks(), 1u);
}

}  // namespace
}  // namespace holoscan::ipc
