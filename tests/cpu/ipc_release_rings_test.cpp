// Covers a connection's release rings (src/ipc/import/ipc_release_stream.*) when the connection
// goes: a ring whose releases have all completed gives its events back to the interprocess pool
// and destroys its stream at once; one still running is kept aside, its events reused by nobody
// (an exporter polling one would see a new record complete before the release it waits for) until
// its last release completes.
#include <gtest/gtest.h>

#include <optional>

#include "ipc/cuda/ipc_event_pool.hpp"
#include "ipc/import/ipc_release_stream.hpp"
#include "stream/stream_point_list.hpp"
#include "support/fake_cuda_ipc.hpp"

namespace holoscan::detail {
namespace {

class IpcReleaseRings : public ::testing::Test {
 protected:
  void TearDown() override {
    if (point_ != nullptr) {
      EXPECT_EQ(test::FakeCuda::table().event_destroy(point_), cudaSuccess);
    }
  }

  // A deallocation point of consumer_, after work that runs until complete_consumer().
  StreamPointList busy_point() {
    consumer_ = scope_.fake().create_stream(0);
    scope_.fake().launch(consumer_);
    const CudaApi& runtime = test::FakeCuda::table();
    EXPECT_EQ(runtime.event_create_with_flags(&point_, cudaEventDisableTiming), cudaSuccess);
    EXPECT_EQ(runtime.event_record(point_, consumer_), cudaSuccess);
    StreamPointList points;
    EXPECT_TRUE(points.push_back(StreamPoint{consumer_, point_, 0}));
    return points;
  }
  void complete_consumer() { scope_.fake().complete(consumer_); }

  test::FakeCudaIpcScope scope_;
  cudaStream_t consumer_ = nullptr;
  cudaEvent_t point_ = nullptr;
};

TEST_F(IpcReleaseRings, ARingWhoseReleasesCompletedIsGivenBackWithItsConnection) {
  StreamPointList points = busy_point();
  std::optional<ReleaseRings> rings{std::in_place};
  ASSERT_TRUE(rings->record(0, points).has_value());
  EXPECT_EQ(scope_.ipc().live_streams(), 1u);
  complete_consumer();
  rings.reset();
  EXPECT_EQ(scope_.ipc().live_streams(), 0u) << "the stream outlived its connection";
  EXPECT_EQ(retire_release_rings(), 0u);
  EXPECT_EQ(destroy_free_ipc_events(), 0u) << "the ring's event never came back to the pool";
}

TEST_F(IpcReleaseRings, ARingStillRunningIsKeptAsideUntilItsLastReleaseCompletes) {
  StreamPointList points = busy_point();
  std::optional<ReleaseRings> rings{std::in_place};
  ASSERT_TRUE(rings->record(0, points).has_value());
  ASSERT_TRUE(rings->record(0, points).has_value());
  rings.reset();

  EXPECT_EQ(retire_release_rings(), 1u);
  EXPECT_EQ(scope_.ipc().live_streams(), 1u);
  EXPECT_EQ(destroy_free_ipc_events(), 2u) << "a running ring's events went back to the pool";

  complete_consumer();
  EXPECT_EQ(retire_release_rings(), 0u);
  EXPECT_EQ(scope_.ipc().live_streams(), 0u);
  EXPECT_EQ(destroy_free_ipc_events(), 0u);
}

TEST_F(IpcReleaseRings, ANewConnectionsFirstReleaseGivesBackTheRingsThatCompletedSince) {
  StreamPointList points = busy_point();
  std::optional<ReleaseRings> gone{std::in_place};
  ASSERT_TRUE(gone->record(0, points).has_value());
  gone.reset();
  complete_consumer();
  EXPECT_EQ(scope_.ipc().live_streams(), 1u) << "kept aside until someone looks again";

  ReleaseRings next;
  StreamPointList none;
  ASSERT_TRUE(next.record(0, none).has_value());
  EXPECT_EQ(scope_.ipc().live_streams(), 1u) << "the new connection's stream only";
  EXPECT_EQ(scope_.ipc().calls(test::CudaIpcEntry::kEventCreateWithFlags), 1u)
      << "the new ring made an event where the gone ring's was free again";
}

}  // namespace
}  // namespace holoscan::detail
