#pragma once
// A fixture for an Exporter (on the fake runtimes, in the test process) facing importers that are
// forked children speaking the channel protocol by hand: the child runs no CUDA at all, so it can
// send what a real Importer never would and exit when the test says.
#include <gtest/gtest.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <utility>

#include "holoscan/ipc.hpp"
#include "holoscan/tensor_pool.hpp"
#include "support/fake_cuda_ipc.hpp"
#include "support/ipc_child.hpp"

namespace holoscan::test {

/** @brief The Hello exchange of an importer that has no Importer: true when it worked. */
bool importer_hello(ipc::Channel& channel);

/** @brief The next Publish on `channel` within 10 s, decoded (nullopt otherwise); its fd closed. */
std::optional<ipc::TensorDescriptor> next_publish(ipc::Channel& channel);

/** @brief An Exporter, a shareable pool and importers forked as raw channel ends. */
class ExporterTest : public ::testing::Test {
 protected:
  /** @brief The exporter and a shareable pool of `blocks` blocks of 1 KiB. */
  void SetUp() override;
  /** @brief Kills what still runs, waits (10 s at most) for every claim to drop, checks fds. */
  void TearDown() override;

  /**
   * @brief Forks `child` as an importer on one end of a Channel::pair(): it exchanges Hello and
   *        runs `body(channel, steps)` (its exit status). The other end becomes a peer; returns
   *        its id (0 when anything failed, which fails the test).
   */
  template <class Body>
  ipc::PeerId fork_importer(Child& child, Body body) {
    auto ends = ipc::Channel::pair();
    if (!ends) {
      ADD_FAILURE() << ends.error().message;
      return 0;
    }
    const bool started = child.start([&] {
      { ipc::Channel theirs = std::move(ends->first); }
      ipc::Channel mine = std::move(ends->second);
      return importer_hello(mine) ? body(mine, child.steps()) : 10;
    });
    { ipc::Channel theirs = std::move(ends->second); }
    if (!started) {
      ADD_FAILURE() << "fork failed";
      return 0;
    }
    return add_peer(std::move(ends->first));
  }

  /** @brief Adds `channel` as a peer (its Hello within 10 s); 0 on failure, which fails the test.
   */
  ipc::PeerId add_peer(ipc::Channel channel);
  test::FakeCuda& fake() { return scope_->fake(); }
  test::FakeCudaIpc& ipc() { return scope_->ipc(); }

  std::size_t blocks_ = 2;
  int fds_before_ = 0;
  std::optional<test::FakeCudaIpcScope> scope_{std::in_place};
  std::shared_ptr<TensorPool> pool_;
  std::optional<ipc::Exporter> exporter_;
  Child importer_;
};

}  // namespace holoscan::test
