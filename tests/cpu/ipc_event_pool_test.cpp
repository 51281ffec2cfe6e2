// Pins the invariant the importer's cache of opened readiness events (OpenedEventCache, keyed by
// handle bytes alone) relies on: the exporter's process never destroys a pooled interprocess
// event (only destroy_free_ipc_events, for tests swapping the CUDA tables, does), so a handle an
// importer has opened can never come to name another event while the process lives. CUDA makes
// operations on an opened event undefined once its exporter destroyed it, and promises nothing
// about the bytes of a later event's handle.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <vector>

#include "ipc/cuda/ipc_event_pool.hpp"
#include "ipc/cuda/ipc_opened_event.hpp"
#include "support/fake_cuda_ipc.hpp"

namespace holoscan::detail {
namespace {

TEST(IpcEventPool, PooledEventsAreNeverDestroyedSoAHandleNamesOneEventForGood) {
  test::FakeCudaIpcScope scope;
  std::map<IpcHandleBytes, cudaEvent_t> named;
  for (std::size_t round = 1; round <= 8; ++round) {
    std::vector<IpcEvent> held;
    for (std::size_t i = 0; i < round * 3 % 7 + 1; ++i) {  // grows and shrinks the pool in use
      auto event = acquire_ipc_event(0);
      ASSERT_TRUE(event.has_value()) << event.error().message;
      held.push_back(*event);
    }
    for (const IpcEvent& event : held) {
      const auto [entry, first] = named.emplace(event.handle, event.event);
      EXPECT_EQ(entry->second, event.event) << "a handle came back naming another event";
      release_ipc_event(event);
    }
  }
  EXPECT_EQ(scope.ipc().calls(test::CudaIpcEntry::kEventDestroy), 0u)
      << "a pooled interprocess event was destroyed while an importer may hold it opened";
}

// A peer whose every message names a new event (another implementation) costs a bounded number of
// opened events: past kMaxCached, the ones no claim holds are closed before another is cached,
// while one still held stays open and cached.
TEST(IpcEventPool, AnOpenedEventCacheKeepsABoundedNumberOfIdleEvents) {
  test::FakeCudaIpcScope scope;
  OpenedEventCache cache;
  std::vector<IpcEvent> made;
  std::shared_ptr<OpenedEvent> held;
  for (std::size_t i = 0; i < OpenedEventCache::kMaxCached + 100; ++i) {
    auto event = acquire_ipc_event(0);  // a fresh event each time: none is given back
    ASSERT_TRUE(event.has_value()) << event.error().message;
    made.push_back(*event);
    auto opened = cache.open(event->handle, 0);
    ASSERT_TRUE(opened.has_value()) << opened.error().message;
    if (i == 0) {
      held = *opened;  // a claim still waits on this one
    }
    ASSERT_LE(cache.size(), OpenedEventCache::kMaxCached);
  }
  auto again = cache.open(made.front().handle, 0);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->get(), held.get()) << "the held event was closed, or opened twice";
  EXPECT_GE(scope.ipc().calls(test::CudaIpcEntry::kEventDestroy), 100u)
      << "idle opened events were never closed";
  held.reset();
  again->reset();
  cache.clear();
  for (const IpcEvent& event : made) {
    release_ipc_event(event);
  }
}

}  // namespace
}  // namespace holoscan::detail
