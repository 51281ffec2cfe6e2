// A worker's waits sleep on its fd only after UCX's progress found nothing: UCX asks that of every
// ucp_worker_arm (ucp.h), and a transport whose arm does not look at completions already queued
// (RDMA's completion queues) would let the thread sleep past them. A round calls UCX's progress
// once; before a sleep it is called again, and anything it finds means another round. Over tcp
// (level-triggered) nothing shows; the test binary's own ucp_worker_progress and ucp_worker_arm
// (watched_arm.cpp) count the arms that did not wait for it.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>

#include "holoscan/tensor_pool.hpp"
#include "ucx/ucx_test_support.hpp"
#include "ucx/watched_arm.hpp"

namespace holoscan::test {
namespace {

constexpr int kRoundTrips = 200;
constexpr int kPatienceMs = 10000;

// A worker whose waits sleep on its fd at once, landing into a host pool of its own.
ucx::Worker make_sleeping_worker(std::shared_ptr<TensorPool> pool) {
  ucx::WorkerConfig config;
  config.spin_us = 0;
  config.receive_pool = std::move(pool);
  return make_worker(config);
}

std::shared_ptr<TensorPool> small_pool() {
  auto pool = TensorPool::create({PoolMemory::kHost, 0, 256, 4});
  EXPECT_TRUE(pool);
  return *pool;
}

TEST(UcxArmContract, AWaitSleepsOnlyAfterUcxsProgressFoundNothing) {
  auto receiving = small_pool();
  auto echoing = small_pool();
  ucx::Worker receiver = make_sleeping_worker(receiving);
  ucx::Worker client = make_sleeping_worker(echoing);
  const InProcessLink link = connect_in_process(receiver, client);
  ASSERT_TRUE(link.client) << to_string(link.client.error());
  const std::size_t arms_before = arms();
  const std::size_t violations_before = arms_after_progress();
  std::atomic<int> echoed{0};
  std::thread echo([&] {  // sends back what comes, sleeping in receive() between tensors
    while (echoed.load() < kRoundTrips) {
      auto received = receiver.receive(kPatienceMs);
      if (!received || !*received) {
        return;
      }
      if (!receiver.send(link.listener, (*received)->tensor)) {
        return;
      }
      echoed.fetch_add(1);
      while (receiver.next_send_result()) {
      }
    }
  });
  auto sending = small_pool();
  int returned = 0;
  for (int i = 0; i < kRoundTrips; ++i) {
    auto tensor = sending->allocate({16}, DLDataType{kDLUInt, 8, 1});
    ASSERT_TRUE(tensor) << to_string(tensor.error());
    ASSERT_TRUE(client.send(*link.client, *tensor));
    auto back = client.receive(kPatienceMs);  // sleeps on the fd until the echo comes
    ASSERT_TRUE(back && *back) << "round trip " << i << " never came back";
    ++returned;
    while (client.next_send_result()) {
    }
  }
  echo.join();
  EXPECT_EQ(returned, kRoundTrips);
  EXPECT_GT(arms() - arms_before, 0u) << "no wait slept: the test watched nothing";
  EXPECT_EQ(arms_after_progress() - violations_before, 0u)
      << "a worker was armed right after UCX's progress had done something";
}

}  // namespace
}  // namespace holoscan::test
