// Covers the batches in which events go back to the pool: every event returned is handed out
// again, none twice (a pool that held one event twice would give it to two owners at once), none
// lost.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <array>
#include <set>
#include <vector>

#include "holoscan/deferred_release.hpp"
#include "holoscan/dlpack.hpp"
#include "holoscan/event_pool.hpp"
#include "stream/pooled_events.hpp"
#include "support/allocation_hooks.hpp"
#include "support/counting_producer.hpp"
#include "support/fake_cuda_test.hpp"

namespace holoscan {
namespace {

using test::CountingProducer;
using test::CudaEntry;

class EventPoolBatch : public test::FakeCudaTest {
 protected:
  EventPoolBatch() : FakeCudaTest(2) {}

  // `count` events of `device` taken by this thread; each must be a different event.
  std::vector<cudaEvent_t> take(int device, std::size_t count) {
    std::vector<cudaEvent_t> events;
    for (std::size_t i = 0; i < count; ++i) {
      auto event = detail::acquire_event(device);
      EXPECT_TRUE(event.has_value());
      events.push_back(event.value_or(nullptr));
    }
    EXPECT_EQ(std::set<cudaEvent_t>(events.begin(), events.end()).size(), count);
    return events;
  }

  void give(int device, const std::vector<cudaEvent_t>& events) {
    for (cudaEvent_t event : events) {
      detail::release_event(device, event);
    }
  }
};

TEST_F(EventPoolBatch, EveryEventGivenBackIsTakenAgainAndNoneTwice) {
  const std::vector<cudaEvent_t> first = take(0, 40);
  EXPECT_EQ(created_stream_events(0), 40u);
  give(0, first);
  const std::vector<cudaEvent_t> again = take(0, 40);
  EXPECT_EQ(created_stream_events(0), 40u);
  EXPECT_EQ(fake().calls(CudaEntry::kEventCreateWithFlags), 40u);
  EXPECT_EQ(std::set<cudaEvent_t>(again.begin(), again.end()),
            std::set<cudaEvent_t>(first.begin(), first.end()));
  give(0, again);
}

TEST_F(EventPoolBatch, EventsTheReleaseThreadReturnsInBatchesAreAllReused) {
  CountingProducer producer;
  std::array<cudaStream_t, 3> streams{};
  for (auto& stream : streams) {
    stream = fake().create_stream(0);
  }
  // Owners whose points wait for the "GPU", so that the release thread returns many at once.
  constexpr int kOwners = 300;
  for (int i = 0; i < kOwners; ++i) {
    DLManagedMemoryBufferVersioned buffer(producer.make_versioned());
    for (cudaStream_t stream : streams) {
      fake().launch(stream);
      ASSERT_TRUE(buffer.set_deallocation_stream(stream));
    }
  }
  fake().complete_all();
  flush_deferred_releases();
  EXPECT_EQ(producer.deleter_calls(), kOwners);
  // Every event made is free again, once: taking them all makes none and gives no event twice.
  const std::size_t created = created_stream_events(0);
  EXPECT_GE(created, 3u);
  const std::vector<cudaEvent_t> all = take(0, created);
  EXPECT_EQ(created_stream_events(0), created);
  give(0, all);
}

TEST_F(EventPoolBatch, ABatchGivesBackEveryEventOfEveryDevice) {
  std::vector<cudaEvent_t> zero;
  std::vector<cudaEvent_t> one;
  zero = take(0, 100);
  one = take(1, 7);
  EXPECT_EQ(created_stream_events(0), 100u);
  EXPECT_EQ(created_stream_events(1), 7u);
  {
    detail::EventBatch batch;  // more than a batch holds, devices interleaved
    for (std::size_t i = 0; i < zero.size(); ++i) {
      batch.add(0, zero[i]);
      if (i < one.size()) {
        batch.add(1, one[i]);
      }
    }
  }
  // Every event is free again, once: none is held, and destroying them all leaves the fake none.
  EXPECT_EQ(detail::destroy_free_events(), 0u);
  EXPECT_EQ(fake().live_events(), 0u);
}

// The pool keeps room to take back every event it made, so that a release never allocates; a
// growing pool made that room one event at a time (one allocation, and a copy of the free list,
// per event made). Measured against the fake's own allocations for as many events.
TEST_F(EventPoolBatch, AGrowingPoolMakesRoomForManyEventsAtATime) {
  constexpr std::size_t kEvents = 2000;  // more than any other test takes: the room is not there
  std::vector<cudaEvent_t> direct(kEvents);
  std::vector<cudaEvent_t> pooled;
  pooled.reserve(kEvents);
  std::uint64_t by_the_fake = 0;
  std::uint64_t by_the_pool = 0;
  {
    test::NewCounter counter;
    for (cudaEvent_t& event : direct) {
      (void)detail::cuda().event_create_with_flags(&event, cudaEventDisableTiming);
    }
    by_the_fake = counter.calls();
  }
  {
    test::NewCounter counter;
    for (std::size_t i = 0; i < kEvents; ++i) {
      pooled.push_back(detail::acquire_event(1).value_or(nullptr));
    }
    by_the_pool = counter.calls();
  }
  EXPECT_EQ(created_stream_events(1), kEvents);
  EXPECT_LE(by_the_pool, by_the_fake + 32);
  give(1, pooled);
  for (cudaEvent_t event : direct) {
    (void)detail::cuda().event_destroy(event);
  }
}

}  // namespace
}  // namespace holoscan
