// Covers StreamState's readiness moved between streams, on one device and across two, against the
// fake runtime: memory is not idle (nor handed over, nor released) while any stream the producer
// recorded readiness on may still write it.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <thread>

#include "holoscan/deferred_release.hpp"
#include "holoscan/dlpack.hpp"
#include "stream/pooled_events.hpp"
#include "stream/stream_state.hpp"
#include "support/allocation_hooks.hpp"
#include "support/counting_producer.hpp"
#include "support/fake_cuda_test.hpp"
#include "support/gtest_printers.hpp"

namespace holoscan {
namespace {

class ReadinessAcrossDevices : public test::FakeCudaTest {
 protected:
  ReadinessAcrossDevices() : FakeCudaTest(2) {}
};

TEST_F(ReadinessAcrossDevices, PollIdleWaitsForTheReadinessLeftOnAnotherDevice) {
  cudaStream_t busy_on_0 = fake().create_stream(0);
  cudaStream_t idle_on_1 = fake().create_stream(1);
  detail::StreamState state;
  fake().launch(busy_on_0);
  ASSERT_TRUE(state.set_readiness_stream(busy_on_0));
  ASSERT_TRUE(state.set_readiness_stream(idle_on_1));  // the readiness moves to a finished stream
  EXPECT_EQ(state.readiness_stream(), idle_on_1);

  EXPECT_FALSE(state.poll_idle());  // device 0's producer may still write the memory
  EXPECT_FALSE(state.poll_idle());
  fake().complete(busy_on_0);
  EXPECT_TRUE(state.poll_idle());
}

// The points of every device the readiness was recorded on are polled in relaxed capture mode, as
// every query a caller's thread makes: in the caller's global mode CUDA refuses the query and
// invalidates another thread's capture. Failed before the fix (the readiness and the points kept
// from other devices were queried in the caller's mode).
TEST_F(ReadinessAcrossDevices, PollIdleNeverInvalidatesAnotherThreadsCapture) {
  cudaStream_t busy_on_0 = fake().create_stream(0);
  cudaStream_t busy_on_1 = fake().create_stream(1);
  cudaStream_t captured = fake().create_stream(0);
  detail::StreamState state;
  fake().launch(busy_on_0);
  fake().launch(busy_on_1);
  ASSERT_TRUE(state.set_readiness_stream(busy_on_0));
  ASSERT_TRUE(state.set_readiness_stream(busy_on_1));
  fake().set_capture(captured, cudaStreamCaptureStatusActive);
  const auto capture = [&] {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    EXPECT_EQ(test::FakeCuda::table().stream_is_capturing(captured, &status), cudaSuccess);
    return status;
  };
  EXPECT_FALSE(state.poll_idle());  // device 0's point
  EXPECT_EQ(capture(), cudaStreamCaptureStatusActive);
  fake().complete(busy_on_0);
  EXPECT_FALSE(state.poll_idle());  // device 1's point, the readiness itself
  EXPECT_EQ(capture(), cudaStreamCaptureStatusActive);
  fake().complete(busy_on_1);
  EXPECT_TRUE(state.poll_idle());
  EXPECT_EQ(capture(), cudaStreamCaptureStatusActive);
  fake().set_capture(captured, cudaStreamCaptureStatusNone);
}

TEST_F(ReadinessAcrossDevices, PollIdleWaitsForTheCurrentReadinessToo) {
  cudaStream_t idle_on_0 = fake().create_stream(0);
  cudaStream_t busy_on_1 = fake().create_stream(1);
  detail::StreamState state;
  ASSERT_TRUE(state.set_readiness_stream(idle_on_0));
  fake().launch(busy_on_1);
  ASSERT_TRUE(state.set_readiness_stream(busy_on_1));

  EXPECT_FALSE(state.poll_idle());
  fake().complete(busy_on_1);
  EXPECT_TRUE(state.poll_idle());
}

TEST_F(ReadinessAcrossDevices, ReleaseWaitsForTheReadinessLeftOnAnotherDevice) {
  test::CountingProducer producer;
  cudaStream_t busy_on_0 = fake().create_stream(0);
  cudaStream_t idle_on_1 = fake().create_stream(1);
  auto buffer = std::make_unique<DLManagedMemoryBufferVersioned>(producer.make_versioned());
  fake().launch(busy_on_0);
  ASSERT_TRUE(buffer->set_readiness_stream(busy_on_0));
  ASSERT_TRUE(buffer->set_readiness_stream(idle_on_1));
  buffer.reset();
  EXPECT_EQ(producer.deleter_calls(), 0);
  EXPECT_EQ(pending_deferred_releases(), 1u);

  fake().complete(busy_on_0);
  flush_deferred_releases();
  EXPECT_EQ(producer.deleter_calls(), 1);
}

// Readiness on device 0 (work still queued), then on device 1, then back on another stream of
// device 0, whose one event is recorded again there: before the fix the first point was simply
// lost (idle, and the deleter run, while device 0's producer could still write).
TEST_F(ReadinessAcrossDevices, PollIdleWaitsForTheReadinessLeftBeforeTheDeviceCameBack) {
  cudaStream_t busy_on_0 = fake().create_stream(0);
  cudaStream_t idle_on_1 = fake().create_stream(1);
  cudaStream_t idle_on_0 = fake().create_stream(0);
  detail::StreamState state;
  fake().launch(busy_on_0);
  ASSERT_TRUE(state.set_readiness_stream(busy_on_0));
  ASSERT_TRUE(state.set_readiness_stream(idle_on_1));
  ASSERT_TRUE(state.set_readiness_stream(idle_on_0));
  EXPECT_EQ(state.readiness_stream(), idle_on_0);

  EXPECT_FALSE(state.poll_idle());
  fake().complete(busy_on_0);
  EXPECT_TRUE(state.poll_idle());
}

TEST_F(ReadinessAcrossDevices, ReleaseWaitsForTheReadinessLeftBeforeTheDeviceCameBack) {
  test::CountingProducer producer;
  cudaStream_t busy_on_0 = fake().create_stream(0);
  cudaStream_t idle_on_1 = fake().create_stream(1);
  cudaStream_t idle_on_0 = fake().create_stream(0);
  auto buffer = std::make_unique<DLManagedMemoryBufferVersioned>(producer.make_versioned());
  fake().launch(busy_on_0);
  ASSERT_TRUE(buffer->set_readiness_stream(busy_on_0));
  ASSERT_TRUE(buffer->set_readiness_stream(idle_on_1));
  ASSERT_TRUE(buffer->set_readiness_stream(idle_on_0));
  buffer.reset();
  EXPECT_FALSE(test::eventually([&] { return producer.deleter_calls() != 0; },
                                std::chrono::milliseconds(50)));
  EXPECT_EQ(pending_deferred_releases(), 1u);

  fake().complete(busy_on_0);
  flush_deferred_releases();
  EXPECT_EQ(producer.deleter_calls(), 1);
}

// Consumers wait for one point and a host wait waits for one event: readiness moved to another
// device must order that point after the first device's producer. Before the fix the first point
// was only kept for reuse, so a consumer on device 1, and a host wait, passed while device 0's
// producer still wrote.
TEST_F(ReadinessAcrossDevices, ConsumersWaitForTheProducerOnTheDeviceTheReadinessLeft) {
  cudaStream_t busy_on_0 = fake().create_stream(0);
  cudaStream_t idle_on_1 = fake().create_stream(1);
  cudaStream_t consumer_on_1 = fake().create_stream(1);
  cudaStream_t consumer_on_0 = fake().create_stream(0);
  detail::StreamState state;
  fake().launch(busy_on_0);
  ASSERT_TRUE(state.set_readiness_stream(busy_on_0));
  ASSERT_TRUE(state.set_readiness_stream(idle_on_1));
  ASSERT_TRUE(state.synchronize_for_consumer(consumer_on_1).has_value());
  ASSERT_TRUE(state.synchronize_for_consumer(consumer_on_0).has_value());
  ASSERT_TRUE(state.synchronize_for_consumer(idle_on_1).has_value());  // the readiness stream
  EXPECT_FALSE(test::later_work_passed(consumer_on_1));
  EXPECT_FALSE(test::later_work_passed(consumer_on_0));
  EXPECT_FALSE(test::later_work_passed(idle_on_1));
  std::atomic<bool> host_returned{false};
  std::thread host([&] {
    EXPECT_TRUE(state.synchronize_for_host().has_value());
    host_returned.store(true);
  });
  EXPECT_FALSE(
      test::eventually([&] { return host_returned.load(); }, std::chrono::milliseconds(50)));
  fake().complete(busy_on_0);
  host.join();
  EXPECT_TRUE(host_returned.load());
  EXPECT_TRUE(test::later_work_passed(consumer_on_1));
  EXPECT_TRUE(test::later_work_passed(consumer_on_0));
}

// Back on the first device, whose kept event is recorded again: ordered after the readiness on the
// device it comes from as well (before the fix, after the kept point alone).
TEST_F(ReadinessAcrossDevices, ConsumersWaitForTheProducerOnTheDeviceTheReadinessCameBackFrom) {
  cudaStream_t idle_on_0 = fake().create_stream(0);
  cudaStream_t busy_on_1 = fake().create_stream(1);
  cudaStream_t again_on_0 = fake().create_stream(0);
  cudaStream_t consumer_on_0 = fake().create_stream(0);
  detail::StreamState state;
  ASSERT_TRUE(state.set_readiness_stream(idle_on_0));
  fake().launch(busy_on_1);
  ASSERT_TRUE(state.set_readiness_stream(busy_on_1));
  ASSERT_TRUE(state.set_readiness_stream(again_on_0));
  ASSERT_TRUE(state.synchronize_for_consumer(consumer_on_0).has_value());
  EXPECT_FALSE(test::later_work_passed(consumer_on_0));
  EXPECT_FALSE(test::later_work_passed(again_on_0));
  fake().complete(busy_on_1);
  EXPECT_TRUE(test::later_work_passed(consumer_on_0));
}

// Readiness moved to another device keeps the first device's point beside it; when the heap
// cannot make room for it, the move fails and the readiness stays where it was. Before the fix the
// first point's event went back to the pool (the move still succeeded), so device 0's producer was
// forgotten: idle at once while it could still write.
TEST_F(ReadinessAcrossDevices, NoRoomToKeepTheFirstDevicesPointLeavesTheReadinessWhereItWas) {
  cudaStream_t busy_on_0 = fake().create_stream(0);
  cudaStream_t idle_on_1 = fake().create_stream(1);
  {
    detail::StreamState warm;  // device 1's pool has a free event: acquiring it allocates nothing
    ASSERT_TRUE(warm.set_readiness_stream(idle_on_1));
  }
  detail::StreamState state;
  fake().launch(busy_on_0);
  ASSERT_TRUE(state.set_readiness_stream(busy_on_0));
  bool moved = false;
  std::uint64_t failed = 0;
  {
    test::FailingAllocations failing(0);
    moved = state.set_readiness_stream(idle_on_1);
    failed = failing.failed();
  }
  EXPECT_EQ(failed, 1u);
  EXPECT_FALSE(moved);
  EXPECT_EQ(state.readiness_stream(), busy_on_0);
  EXPECT_FALSE(state.poll_idle());  // before the fix: idle while device 0's producer ran
  fake().complete(busy_on_0);
  EXPECT_TRUE(state.poll_idle());
}

// Readiness moved from a busy stream to an idle one on the same device: one event serves both,
// so before the fix the first stream's point was simply lost.
class ReadinessAcrossStreams : public test::FakeCudaTest {
 protected:
  ReadinessAcrossStreams() : busy_(fake().create_stream(0)), idle_(fake().create_stream(0)) {}

  // Records readiness on busy_ (with work queued), then moves it to idle_.
  void move_readiness(detail::StreamState& state) {
    fake().launch(busy_);
    ASSERT_TRUE(state.set_readiness_stream(busy_));
    ASSERT_TRUE(state.set_readiness_stream(idle_));
    ASSERT_EQ(state.readiness_stream(), idle_);
  }

  cudaStream_t busy_;
  cudaStream_t idle_;
};

TEST_F(ReadinessAcrossStreams, PollIdleWaitsForTheReadinessLeftOnTheFirstStream) {
  detail::StreamState state;
  move_readiness(state);
  EXPECT_FALSE(state.poll_idle());  // before the fix: idle at once
  fake().complete(busy_);
  EXPECT_TRUE(state.poll_idle());
}

TEST_F(ReadinessAcrossStreams, ReleaseWaitsForTheReadinessLeftOnTheFirstStream) {
  test::CountingProducer producer;
  auto buffer = std::make_unique<DLManagedMemoryBufferVersioned>(producer.make_versioned());
  fake().launch(busy_);
  ASSERT_TRUE(buffer->set_readiness_stream(busy_));
  ASSERT_TRUE(buffer->set_readiness_stream(idle_));
  buffer.reset();
  EXPECT_FALSE(test::eventually([&] { return producer.deleter_calls() != 0; },
                                std::chrono::milliseconds(50)));
  EXPECT_EQ(pending_deferred_releases(), 1u);

  fake().complete(busy_);
  flush_deferred_releases();
  EXPECT_EQ(producer.deleter_calls(), 1);
}

TEST_F(ReadinessAcrossStreams, HandOverWaitsForTheReadinessLeftOnTheFirstStream) {
  cudaStream_t next_user = fake().create_stream(0);
  detail::StreamState state;
  move_readiness(state);
  ASSERT_TRUE(state.hand_over_to(next_user));  // stream-ordered pool reuse
  EXPECT_FALSE(test::later_work_passed(next_user));
  fake().complete(busy_);
  EXPECT_TRUE(test::later_work_passed(next_user));
}

// The release points taken with the readiness beyond the list's inline room (four deallocation
// points, none ordered after the readiness) while the heap refuses: the readiness point is waited
// for here rather than forgotten. Before the fix its event went back to the pool at once, and the
// points handed out (all passed) let the release run while the producer still wrote.
TEST_F(ReadinessAcrossStreams, NoRoomForTheReadinessAmongTheReleasePointsWaitsForIt) {
  detail::StreamState state;
  fake().launch(busy_);
  ASSERT_TRUE(state.set_readiness_stream(busy_));
  for (std::size_t i = 0; i < detail::StreamPointList::kInlineCapacity; ++i) {
    ASSERT_TRUE(state.set_deallocation_stream(fake().create_stream(0)));  // passed at once
  }
  const auto syncs = fake().calls(test::CudaEntry::kEventSynchronize);
  std::atomic<bool> taken{false};
  std::thread gpu([&] {  // the producer finishes once the host waits for it (or it was taken)
    (void)test::eventually(
        [&] { return taken.load() || fake().calls(test::CudaEntry::kEventSynchronize) > syncs; });
    fake().complete(busy_);
  });
  std::optional<detail::StreamPointList> points;
  std::uint64_t failed = 0;
  {
    test::FailingAllocations failing(0);
    points.emplace(state.take_release_points());
    failed = failing.failed();
  }
  // Asked before the gpu thread may finish it.
  const bool producer_done = test::later_work_passed(busy_);
  taken = true;
  gpu.join();
  EXPECT_EQ(failed, 1u);
  EXPECT_TRUE(producer_done) << "release points handed out without the readiness, which had not "
                                "passed";
  EXPECT_TRUE(detail::drop_completed_points(*points));
}

TEST_F(ReadinessAcrossStreams, ConsumersWaitForBothStreamsWithOneWait) {
  cudaStream_t consumer = fake().create_stream(0);
  detail::StreamState state;
  move_readiness(state);
  const auto waits = fake().calls(test::CudaEntry::kStreamWaitEvent);
  ASSERT_TRUE(state.synchronize_for_consumer(consumer));
  EXPECT_EQ(fake().calls(test::CudaEntry::kStreamWaitEvent) - waits, 1u);
  EXPECT_FALSE(test::later_work_passed(consumer));
  fake().complete(busy_);
  EXPECT_TRUE(test::later_work_passed(consumer));
}

TEST_F(ReadinessAcrossStreams, MovingCostsOneWaitAndStayingNone) {
  detail::StreamState state;
  const auto waits = [&] { return fake().calls(test::CudaEntry::kStreamWaitEvent); };
  const auto before = waits();
  ASSERT_TRUE(state.set_readiness_stream(busy_));
  ASSERT_TRUE(state.set_readiness_stream(busy_));  // the same stream: the point moves forward
  EXPECT_EQ(waits() - before, 0u);
  ASSERT_TRUE(state.set_readiness_stream(idle_));
  EXPECT_EQ(waits() - before, 1u);
}

TEST_F(ReadinessAcrossStreams, FailedWaitLeavesTheReadinessWhereItWas) {
  detail::StreamState state;
  fake().launch(busy_);
  ASSERT_TRUE(state.set_readiness_stream(busy_));
  fake().fail_next(test::CudaEntry::kStreamWaitEvent, cudaErrorLaunchFailure);
  EXPECT_FALSE(state.set_readiness_stream(idle_));
  EXPECT_EQ(fake().last_error(), cudaSuccess);
  EXPECT_EQ(state.readiness_stream(), busy_);
  EXPECT_FALSE(state.poll_idle());
  fake().complete(busy_);
  EXPECT_TRUE(state.poll_idle());
}

// A stream-ordered hand-over keeps the former owner's points, the new stream standing for them:
// no record of its own. The new owner's first record on that stream is ordered after them all and
// retires them; until then they keep the memory from reuse.
class HandOverKeepsPoints : public test::FakeCudaTest {
 protected:
  // A former owner's readiness on `producer` and a point of `reader`, whose work still runs, then
  // a hand-over to `producer`.
  void hand_over_while_read(detail::StreamState& state, cudaStream_t producer,
                            cudaStream_t reader) {
    ASSERT_TRUE(state.set_readiness_stream(producer));
    fake().launch(reader);
    ASSERT_TRUE(state.set_deallocation_stream(reader));
    ASSERT_TRUE(state.hand_over_to(producer).has_value());
  }

  // The points a release would take now (returned to the pool at once): how many were kept.
  static std::size_t points_held(detail::StreamState& state) {
    detail::StreamPointList points = state.take_release_points();
    const std::size_t held = points.size();
    for (std::size_t i = 0; i < points.size(); ++i) {
      detail::release_event(points[i].device, points[i].event);
    }
    return held;
  }
};

TEST_F(HandOverKeepsPoints, TheHandOverRecordsNothingAndKeepsTheReadersPoint) {
  cudaStream_t producer = fake().create_stream(0);
  cudaStream_t reader = fake().create_stream(0);
  detail::StreamState state;
  const auto records = fake().calls(test::CudaEntry::kEventRecord);
  hand_over_while_read(state, producer, reader);
  EXPECT_EQ(fake().calls(test::CudaEntry::kEventRecord), records + 2);  // readiness, reader only
  EXPECT_FALSE(state.has_readiness());              // the new owner has recorded none
  EXPECT_EQ(state.deallocation_point_count(), 0u);  // the kept points are the former owner's
  EXPECT_FALSE(state.poll_idle()) << "idle while the former owner's reader runs";
  fake().complete(reader);
  EXPECT_TRUE(state.poll_idle());
}

TEST_F(HandOverKeepsPoints, TheNewOwnersFirstRecordOnTheStreamRetiresThem) {
  cudaStream_t producer = fake().create_stream(0);
  cudaStream_t reader = fake().create_stream(0);
  detail::StreamState state;
  hand_over_while_read(state, producer, reader);
  ASSERT_TRUE(state.set_readiness_stream(producer));  // after the wait for the reader
  EXPECT_EQ(points_held(state), 1u);                  // the new readiness alone
  fake().complete_all();
}

TEST_F(HandOverKeepsPoints, ARecordOnAnotherStreamRetiresNothing) {
  cudaStream_t producer = fake().create_stream(0);
  cudaStream_t reader = fake().create_stream(0);
  cudaStream_t elsewhere = fake().create_stream(0);
  detail::StreamState state;
  hand_over_while_read(state, producer, reader);
  ASSERT_TRUE(state.set_readiness_stream(elsewhere));  // not ordered after the reader
  EXPECT_FALSE(state.poll_idle());
  ASSERT_TRUE(state.set_deallocation_stream(reader));  // the reader's kept point, this owner's now
  EXPECT_EQ(state.deallocation_point_count(), 1u);
  EXPECT_EQ(points_held(state), 3u);  // the new readiness, the reader's point, the old readiness
  fake().complete_all();
}

// The block's five inline points kept (the readiness of a writer stream and four readers), the
// new owner's first record on the hand-over stream is a deallocation point of its own (a scratch
// buffer, with no readiness): it retires the kept points, so it needs none of the heap that a sixth
// point would. Before the fix the point was appended first, past the inline room, and where the
// heap refused, the record failed (the point the hand-over used to record was moved forward).
TEST_F(HandOverKeepsPoints, AFirstDeallocationPointOnTheStreamTakesNoHeap) {
  cudaStream_t producer = fake().create_stream(0);
  cudaStream_t writer = fake().create_stream(0);
  cudaStream_t readers[4];
  for (cudaStream_t& reader : readers) {
    reader = fake().create_stream(0);
  }
  const auto read_and_hand_over = [&](detail::StreamState& state) {
    ASSERT_TRUE(state.set_readiness_stream(writer));
    for (cudaStream_t reader : readers) {
      fake().launch(reader);
      ASSERT_TRUE(state.set_deallocation_stream(reader));
    }
    ASSERT_TRUE(state.hand_over_to(producer).has_value());
  };
  {
    detail::StreamState warm;  // its events go back to the pool
    read_and_hand_over(warm);
    ASSERT_TRUE(warm.set_deallocation_stream(producer));
  }
  detail::StreamState state;
  read_and_hand_over(state);
  bool recorded = false;
  std::uint64_t refused = 0;
  {
    test::FailingAllocations failing(0, 1000);
    recorded = state.set_deallocation_stream(producer);
    refused = failing.failed();
  }
  EXPECT_TRUE(recorded);
  EXPECT_EQ(refused, 0u) << "the point took the heap";
  EXPECT_EQ(state.deallocation_point_count(), 1u);
  EXPECT_EQ(points_held(state), 1u);  // the kept points retired
  fake().complete_all();
}

}  // namespace
}  // namespace holoscan
