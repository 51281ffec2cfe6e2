// One Exporter called from many threads at once, as its header allows ("thread-safe"): two
// publishers to two importers, a thread that polls, one that asks for its counters, and the two
// importers receiving and dropping on threads of their own. Every tensor published must arrive
// once, with its values, and every claim must come back; run under ThreadSanitizer too (the tsan
// preset), which is what makes a data race here a failure.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "holoscan/deferred_release.hpp"
#include "holoscan/ipc.hpp"
#include "holoscan/tensor_pool.hpp"
#include "ipc/cuda/cuda_ipc_api.hpp"
#include "support/fake_cuda_ipc.hpp"
#include "support/gtest_printers.hpp"
#include "support/ipc_peers.hpp"

namespace holoscan::ipc {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kPerPublisher = 200;
constexpr std::size_t kBlocks = 8;

// What one importer's thread saw: tensors received, and those whose values were not the ones
// their publisher wrote.
struct Received {
  std::atomic<int> count{0};
  std::atomic<int> wrong{0};
};

// Receives and drops until `expected` tensors came or the time is up. Each tensor's first value
// names it (its publisher's sequence number); every value after it counts up from there.
void receive_all(Importer& importer, int expected, Received& seen) {
  const auto until = Clock::now() + std::chrono::seconds(60);
  while (seen.count.load() < expected && Clock::now() < until) {
    auto received = importer.receive(100);
    if (!received || !*received) {
      continue;
    }
    const auto* values = static_cast<const float*>((*received)->data());
    for (int i = 1; i < 16; ++i) {
      if (values[i] != values[0] + static_cast<float>(i)) {
        seen.wrong.fetch_add(1);
        break;
      }
    }
    seen.count.fetch_add(1);
  }
}

TEST(IpcThreads, OneExporterCalledFromManyThreadsLosesAndMixesNothing) {
  test::FakeCudaIpcScope scope;
  auto exporter = Exporter::create();
  ASSERT_TRUE(exporter.has_value()) << exporter.error().message;
  auto pool = test::make_device_pool(1024, kBlocks, test::PoolKind::kShareable);
  ASSERT_NE(pool, nullptr);
  std::array<test::ConnectedImporter, 2> importers{test::connect_importer(*exporter),
                                                   test::connect_importer(*exporter)};
  for (const auto& connected : importers) {
    ASSERT_TRUE(connected.importer.has_value());
  }

  std::atomic<bool> stop{false};
  std::atomic<int> publish_failures{0};
  std::array<Received, 2> seen;
  std::vector<std::thread> threads;
  for (std::size_t p = 0; p < importers.size(); ++p) {
    threads.emplace_back([&, p] {
      for (int n = 0; n < kPerPublisher; ++n) {
        std::optional<Tensor> tensor;
        const auto until = Clock::now() + std::chrono::seconds(30);
        while (!tensor && Clock::now() < until) {
          auto block = pool->allocate({16}, test::kIpcFloat32);
          if (block) {
            tensor = std::move(*block);
          } else {
            std::this_thread::yield();  // the poller gives blocks back as Releases come
          }
        }
        if (!tensor) {
          publish_failures.fetch_add(1);
          return;
        }
        auto* values = static_cast<float*>(tensor->data());
        for (int i = 0; i < 16; ++i) {
          values[i] = static_cast<float>(n * 100 + i);
        }
        if (!exporter->publish(importers[p].peer, *tensor)) {
          publish_failures.fetch_add(1);
        }
      }
    });
    threads.emplace_back([&, p] { receive_all(*importers[p].importer, kPerPublisher, seen[p]); });
  }
  std::thread poller([&] {
    while (!stop.load()) {
      (void)exporter->poll();
      std::this_thread::yield();
    }
  });
  std::thread observer([&] {
    while (!stop.load()) {
      const ExporterStats stats = exporter->stats();
      EXPECT_LE(stats.releases, stats.published);
      (void)exporter->held();
      for (const auto& connected : importers) {
        (void)exporter->connected(connected.peer);
      }
      std::this_thread::yield();
    }
  });
  for (std::thread& thread : threads) {
    thread.join();
  }
  EXPECT_EQ(publish_failures.load(), 0);
  for (std::size_t p = 0; p < seen.size(); ++p) {
    EXPECT_EQ(seen[p].count.load(), kPerPublisher) << "importer " << p;
    EXPECT_EQ(seen[p].wrong.load(), 0) << "importer " << p << " read another tensor's values";
  }
  flush_deferred_releases();
  const auto until = Clock::now() + std::chrono::seconds(10);
  while (exporter->held() != 0 && Clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  stop.store(true);
  poller.join();
  observer.join();
  EXPECT_EQ(exporter->held(), 0u) << "claims never came back";
  EXPECT_EQ(pool->available_blocks(), kBlocks);
  EXPECT_EQ(exporter->stats().published, 2u * kPerPublisher);
}

// The fake's table with cuMemImportFromShareableHandle taking 2 s, as a slow driver would: long
// beside the bound below, so that a drop that waited is told from one descheduled for a while.
const holoscan::detail::CudaIpcApi* fast_table = nullptr;
CUresult slow_import(CUmemGenericAllocationHandle* handle, void* os_handle,
                     CUmemAllocationHandleType type) {
  std::this_thread::sleep_for(std::chrono::milliseconds(2000));
  return fast_table->mem_import_from_shareable_handle(handle, os_handle, type);
}

// Giving an import back never waits for another thread's driver calls: one thread's receive()
// maps a new allocation (slowly) while another drops an earlier import, whose Release goes from
// that thread at once. The drop once waited for the mapping on the importer's one lock.
TEST(IpcThreads, DroppingAnImportDoesNotWaitForAnotherThreadsMapping) {
  test::FakeCudaIpcScope scope;
  test::LocalLink link = test::local_link(4);
  ASSERT_TRUE(link.ok());
  auto second_pool = test::make_device_pool(1024, 4, test::PoolKind::kShareable);
  ASSERT_NE(second_pool, nullptr);
  Tensor first = test::allocate(*link.pool, {8});
  ASSERT_TRUE(link.exporter->publish(link.peer, first).has_value());
  Tensor imported_first = test::receive_one(*link.importer);
  ASSERT_TRUE(imported_first);
  Tensor second = test::allocate(*second_pool, {8});  // a new allocation: its fd comes along
  ASSERT_TRUE(link.exporter->publish(link.peer, second).has_value());

  static holoscan::detail::CudaIpcApi slow;
  fast_table = &test::FakeCudaIpc::table();
  slow = *fast_table;
  slow.mem_import_from_shareable_handle = &slow_import;
  const holoscan::detail::CudaIpcApi* previous = holoscan::detail::install_cuda_ipc_api(&slow);
  std::atomic<bool> mapping{false};
  std::optional<Tensor> imported_second;
  std::thread receiver([&] {
    mapping = true;
    auto received = link.importer->receive(5000);
    if (received && *received) {
      imported_second = std::move(**received);
    }
  });
  while (!mapping) {
    std::this_thread::yield();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // inside the mapping by now
  const auto started = Clock::now();
  imported_first = Tensor();  // no deallocation point: its Release goes from here
  const auto took = Clock::now() - started;
  receiver.join();
  holoscan::detail::install_cuda_ipc_api(previous);
  EXPECT_LT(took, std::chrono::milliseconds(1000))
      << "the drop waited for the mapping: "
      << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms";
  ASSERT_TRUE(imported_second.has_value()) << "the second import came";
  imported_second.reset();
  flush_deferred_releases();
  EXPECT_TRUE(test::poll_until(*link.exporter, [&] { return link.exporter->held() == 0; }));
}

// An Exporter going away while another thread waits in its add_peer() for a Hello that never
// comes ends that wait (the channel is shut down) and waits for the call to return, which is
// kClosed: it used to return at once, and the call read the freed Exporter once its wait ran out.
// The same for an Exporter assigned over.
expected<PeerId, Error> add_peer_ended_by(const std::function<void(Exporter&)>& end_it) {
  auto made = Exporter::create();
  EXPECT_TRUE(made.has_value()) << made.error().message;
  auto ends = Channel::pair();
  EXPECT_TRUE(ends.has_value()) << ends.error().message;
  if (!made || !ends) {
    return make_unexpected(ErrorCode::kFailure, "no exporter or channel");
  }
  auto exporter =
      std::make_unique<Exporter>(std::move(*made));  // on the heap: ASan sees a late read
  Exporter* const target = exporter.get();
  auto waiting =
      std::async(std::launch::async, [target, channel = std::move(ends->first)]() mutable {
        return target->add_peer(std::move(channel), 10000);  // no Hello
      });
  // The call sends its own Hello once it is under way (the destructor then waits for it): a
  // call not yet begun would start on a destroyed Exporter.
  auto hello = ends->second.receive(5000);
  if (!hello || !*hello) {
    ADD_FAILURE() << "add_peer() sent no Hello";
    (void)waiting.wait_for(std::chrono::seconds(15));  // not yet ended: it may not have begun
    return make_unexpected(ErrorCode::kFailure, "no Hello");
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // asleep in the Hello's wait
  const auto ending = std::chrono::steady_clock::now();
  end_it(*exporter);
  exporter.reset();
  // Woken, not waited out: the end took far less than the Hello's 10 s limit.
  EXPECT_LT(std::chrono::steady_clock::now() - ending, std::chrono::seconds(2));
  if (waiting.wait_for(std::chrono::seconds(3)) != std::future_status::ready) {
    ADD_FAILURE() << "the add_peer() was not ended";
    std::_Exit(1);  // it still reads the Exporter: nothing after this is sound
  }
  return waiting.get();
}

void expect_ended_by_the_exporters_end(const expected<PeerId, Error>& added) {
  ASSERT_FALSE(added.has_value());
  EXPECT_EQ(added.error().code, ErrorCode::kClosed);
  EXPECT_EQ(added.error().message, "ipc exporter: the exporter is being destroyed");
}

TEST(IpcThreads, DestroyingTheExporterEndsAnAddPeerWaitingForItsHello) {
  test::FakeCudaIpcScope scope;
  expect_ended_by_the_exporters_end(add_peer_ended_by([](Exporter&) {}));
}

// The assignment ends the calls itself before the state moves (they read the member it
// rewrites); the old state's destructor would end them too, so the race that this prevents shows
// under ThreadSanitizer (the tsan preset), not in the result.
TEST(IpcThreads, AssigningOverTheExporterEndsAnAddPeerWaitingForItsHello) {
  test::FakeCudaIpcScope scope;
  expect_ended_by_the_exporters_end(add_peer_ended_by([](Exporter& exporter) {
    auto other = Exporter::create();
    ASSERT_TRUE(other.has_value());
    exporter = std::move(*other);
  }));
}

}  // namespace
}  // namespace holoscan::ipc
