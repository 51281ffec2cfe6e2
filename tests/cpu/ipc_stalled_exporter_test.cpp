// Covers an exporter that stops reading while an importer gives its exports back: nothing on the
// user's threads or the release thread waits for it. Dropping imports and destroying the Importer
// return at once (bounded generously: 400 ms, where waiting for the exporter took a second), the
// Releases that find the socket full are queued without allocating, an unrelated deferred deleter
// on the release thread is not held up, and every Release reaches the exporter once it reads
// again, with no call on the importer's side (the library's courier thread sends them), also
// one that the socket refused for a reason other than a full buffer.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

#include "holoscan/dlpack.hpp"
#include "holoscan/ipc.hpp"
#include "support/allocation_hooks.hpp"
#include "support/callback_tensor.hpp"
#include "support/fake_cuda_ipc.hpp"
#include "support/fake_cuda_test.hpp"
#include "support/gtest_printers.hpp"
#include "support/ipc_peers.hpp"
#include "support/ipc_raw_socket.hpp"

namespace holoscan::ipc {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kExports = 64;
// Well under the second that waiting for the exporter took, and far over any stall of a loaded
// machine (a sanitizer build, two tests beside): the longest of 64 drops is what is bounded.
constexpr long kPromptMs = 400;

long ms(Clock::duration d) {
  return static_cast<long>(std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
}

template <class F>
long ms_of(F f) {
  const auto start = Clock::now();
  f();
  return ms(Clock::now() - start);
}

class IpcStalledExporter : public ::testing::Test {
 protected:
  void SetUp() override {
    fds_before_ = test::open_fd_count();
    ASSERT_EQ(pending_deferred_releases(), 0u);
    link_.emplace(test::local_link(1));
    ASSERT_TRUE(link_->ok());
    // Room for a handful of Releases only, so that the stalled exporter's socket fills at once.
    const int small = 1;
    ASSERT_EQ(::setsockopt(link_->importer->fd(), SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)), 0);
    Tensor tensor = test::allocate(*link_->pool, {8});
    for (int i = 0; i < kExports; ++i) {
      ASSERT_TRUE(link_->exporter->publish(link_->peer, tensor).has_value());
    }
    for (int i = 0; i < kExports; ++i) {
      imports_.push_back(test::receive_one(*link_->importer));
      ASSERT_TRUE(imports_.back());
    }
  }

  void TearDown() override {
    imports_.clear();
    link_.reset();
    scope_.reset();
    EXPECT_EQ(test::open_fd_count(), fds_before_) << "descriptor leak";
  }

  // Drops every import, each on this thread, and returns the longest drop in milliseconds.
  long drop_imports() {
    long longest = 0;
    for (Tensor& imported : imports_) {
      longest = std::max(longest, ms_of([&] { imported = Tensor(); }));
    }
    return longest;
  }

  // The exporter reads again: every claim must come back, with nothing done on the importer side.
  void expect_every_release_arrives() {
    ASSERT_TRUE(test::poll_until(*link_->exporter, [&] { return link_->exporter->held() == 0; }))
        << link_->exporter->held() << " Release(s) never arrived";
    EXPECT_EQ(link_->exporter->stats().releases, static_cast<std::uint64_t>(kExports));
    EXPECT_EQ(link_->pool->available_blocks(), 1u);
  }

  int fds_before_ = 0;
  std::optional<test::FakeCudaIpcScope> scope_{std::in_place};
  std::optional<test::LocalLink> link_;
  std::vector<Tensor> imports_;
};

TEST_F(IpcStalledExporter, DroppingImportsAndTheImporterReturnsAtOnceAndNoReleaseIsLost) {
  EXPECT_LT(ms_of([&] { link_->importer.reset(); }), kPromptMs) << "destroying the Importer";
  EXPECT_LT(drop_imports(), kPromptMs) << "dropping an imported tensor";
  expect_every_release_arrives();
  EXPECT_TRUE(test::poll_until(*link_->exporter, [&] {
    return !link_->exporter->connected(link_->peer);
  })) << "the importer's socket stayed open after its last Release went";
}

TEST_F(IpcStalledExporter, ReleasesQueuedBehindAStalledExporterAllocateNothing) {
  std::uint64_t allocations = 0;
  {
    test::NewCounter counter;
    for (Tensor& imported : imports_) {
      imported = Tensor();
    }
    allocations = counter.calls();
  }
  EXPECT_GT(link_->importer->queued_releases(), 0u) << "the socket never filled";
  EXPECT_EQ(allocations, 0u) << "giving an import back allocated";
  expect_every_release_arrives();  // the Importer is alive and never called
  EXPECT_EQ(link_->importer->queued_releases(), 0u);
}

TEST_F(IpcStalledExporter, ReleaseThreadIsNotHeldUpByTheStalledExporter) {
  // The last import is given back by the release thread, after its consumer's stream: it is the
  // importer's last owner there. An unrelated deleter queued behind it must not wait for the
  // exporter either.
  const cudaStream_t consumer = scope_->fake().create_stream(0);
  scope_->fake().launch(consumer);
  ASSERT_TRUE(imports_.back().set_deallocation_stream(consumer));
  link_->importer.reset();
  std::atomic<bool> ran{false};
  Clock::time_point ran_at{};
  {
    DLManagedMemoryBufferVersioned unrelated(test::make_callback_tensor([&] {
      ran_at = Clock::now();
      ran = true;
    }));
    ASSERT_TRUE(unrelated.set_deallocation_stream(consumer));
    EXPECT_LT(drop_imports(), kPromptMs);
  }
  const auto completed_at = Clock::now();
  scope_->fake().complete(consumer);
  ASSERT_TRUE(test::eventually([&] { return ran.load(); }));
  EXPECT_LT(ms(ran_at - completed_at), kPromptMs) << "the release thread waited for the exporter";
  expect_every_release_arrives();
}

// A Release the socket refuses for a reason other than a full buffer (here ENOTSOCK: a pipe stands
// in for the socket for a moment) is retried by the courier, with nobody left to flush the queue.
TEST_F(IpcStalledExporter, AReleaseRefusedForAnotherReasonIsRetriedByTheCourier) {
  const int fd = link_->importer->fd();
  UniqueFd socket(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
  int ends[2] = {-1, -1};
  ASSERT_TRUE(socket.valid());
  ASSERT_EQ(::pipe2(ends, O_CLOEXEC), 0);
  const UniqueFd read_end(ends[0]);
  const UniqueFd write_end(ends[1]);
  link_->importer.reset();  // the imports keep the channel; nothing on this side flushes it
  ASSERT_EQ(::dup3(write_end.get(), fd, O_CLOEXEC), fd);
  imports_.front() = Tensor();  // its Release is refused (ENOTSOCK) and stays queued
  ASSERT_EQ(::dup3(socket.get(), fd, O_CLOEXEC), fd);
  EXPECT_TRUE(test::poll_until(*link_->exporter, [&] {
    return link_->exporter->held() == static_cast<std::size_t>(kExports - 1);
  })) << "the refused Release was never retried";
  (void)drop_imports();
  expect_every_release_arrives();
}

}  // namespace
}  // namespace holoscan::ipc
