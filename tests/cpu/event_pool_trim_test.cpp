// Covers trim_stream_events: it destroys free events only, never one an owner uses, down to what
// the caller keeps; the pool then serves and takes back events as before (a give-back after a trim
// still never allocates), and a device out of range, or whose events are all in use, has nothing
// to trim.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "holoscan/event_pool.hpp"
#include "stream/pooled_events.hpp"
#include "support/allocation_hooks.hpp"
#include "support/fake_cuda_test.hpp"

namespace holoscan {
namespace {

using test::CudaEntry;

class EventPoolTrim : public test::FakeCudaTest {
 protected:
  std::vector<cudaEvent_t> take(std::size_t count) {
    std::vector<cudaEvent_t> events;
    for (std::size_t i = 0; i < count; ++i) {
      auto event = detail::acquire_event(0);
      EXPECT_TRUE(event.has_value());
      events.push_back(event.value_or(nullptr));
    }
    return events;
  }

  static void give(const std::vector<cudaEvent_t>& events) {
    for (cudaEvent_t event : events) {
      detail::release_event(0, event);
    }
  }
};

TEST_F(EventPoolTrim, DestroysFreeEventsOnlyAndLeavesThoseInUse) {
  std::vector<cudaEvent_t> events = take(1000);
  const std::vector<cudaEvent_t> in_use(events.begin(), events.begin() + 100);
  give(std::vector<cudaEvent_t>(events.begin() + 100, events.end()));
  ASSERT_EQ(created_stream_events(0), 1000u);

  EXPECT_EQ(trim_stream_events(0), 900u);
  EXPECT_EQ(created_stream_events(0), 100u);
  EXPECT_EQ(fake().calls(CudaEntry::kEventDestroy), 900u);
  EXPECT_EQ(fake().live_events(), 100u) << "an event in use was destroyed";
  EXPECT_EQ(trim_stream_events(0), 0u) << "nothing free is left to destroy";

  // The events in use come back and are handed out again; none is made anew.
  give(in_use);
  const std::vector<cudaEvent_t> again = take(100);
  EXPECT_EQ(std::set<cudaEvent_t>(again.begin(), again.end()),
            std::set<cudaEvent_t>(in_use.begin(), in_use.end()));
  EXPECT_EQ(fake().calls(CudaEntry::kEventCreateWithFlags), 1000u);
  give(again);
}

TEST_F(EventPoolTrim, KeepsAsManyAsAsked) {
  give(take(300));
  EXPECT_EQ(trim_stream_events(0, 200), 100u);
  EXPECT_EQ(created_stream_events(0), 200u);
  EXPECT_EQ(trim_stream_events(0, 200), 0u);
  EXPECT_EQ(trim_stream_events(0, 500), 0u) << "a trim never makes events";
  EXPECT_EQ(fake().live_events(), 200u);
}

TEST_F(EventPoolTrim, AfterATrimThePoolGrowsAgainAndAGiveBackStillNeverAllocates) {
  give(take(5000));
  EXPECT_EQ(trim_stream_events(0, 10), 4990u);
  const std::vector<cudaEvent_t> events = take(3000);  // 2990 made anew, the room grown again
  EXPECT_EQ(created_stream_events(0), 3000u);
  std::uint64_t allocations = 0;
  {
    test::NewCounter counter;
    give(events);
    allocations = counter.calls();
  }
  EXPECT_EQ(allocations, 0u) << "the free list's room no longer covers every event made";
  EXPECT_EQ(trim_stream_events(0), 3000u);
  EXPECT_EQ(fake().live_events(), 0u);
}

TEST_F(EventPoolTrim, ADeviceOutOfRangeOrWithNothingFreeHasNothingToTrim) {
  const std::vector<cudaEvent_t> in_use = take(3);
  EXPECT_EQ(trim_stream_events(0), 0u) << "every event is in use";
  give(in_use);
  EXPECT_EQ(trim_stream_events(-1), 0u);
  EXPECT_EQ(trim_stream_events(detail::kMaxPoolDevices), 0u);
  EXPECT_EQ(fake().calls(CudaEntry::kEventDestroy), 0u);
  EXPECT_EQ(trim_stream_events(0), 3u);
}

}  // namespace
}  // namespace holoscan
