// Covers how the release thread settles points: one question per stream and round (its newest
// point), a binary search while a stream lags, streams of other threads and other streams asked
// apart, no question for a point known to have completed, and a slow stream that does not hold
// back releases waiting on others. StreamProgress is driven directly where the count of questions
// must be exact; the release thread where the whole path matters.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "holoscan/deferred_release.hpp"
#include "holoscan/dlpack.hpp"
#include "stream/pooled_events.hpp"
#include "stream/stream_point.hpp"
#include "stream/stream_progress.hpp"
#include "support/counting_producer.hpp"
#include "support/fake_cuda_test.hpp"

namespace holoscan {
namespace {

using detail::StreamPoint;
using detail::StreamPointList;
using detail::StreamProgress;
using test::CountingProducer;
using test::CudaEntry;
using test::eventually;

using Buffer = DLManagedMemoryBufferVersioned;

class ReleaseStreamProgress : public test::FakeCudaTest {
 protected:
  // A point recorded on `stream` now, by this thread.
  StreamPoint record(cudaStream_t stream) {
    auto location = detail::locate_stream(stream);
    EXPECT_TRUE(location.has_value());
    auto event = detail::acquire_event(location->device);
    EXPECT_TRUE(event.has_value());
    StreamPoint point = location->point(stream, *event);
    EXPECT_TRUE(detail::record_point(point, stream).has_value());
    return point;
  }

  // The questions `settle` asks of the GPU for `lists`.
  std::uint64_t questions(StreamProgress& progress, const std::vector<StreamPointList*>& lists) {
    const auto before = fake().calls(CudaEntry::kEventQuery);
    progress.settle(lists);
    return fake().calls(CudaEntry::kEventQuery) - before;
  }
};

TEST_F(ReleaseStreamProgress, AStreamThatCaughtUpCostsOneQuestion) {
  cudaStream_t stream = fake().create_stream(0);
  constexpr int kPoints = 16;
  std::vector<StreamPointList> lists(kPoints);
  std::vector<StreamPointList*> all;
  for (auto& list : lists) {
    fake().launch(stream);
    ASSERT_TRUE(list.push_back(record(stream)));
    all.push_back(&list);
  }
  StreamProgress progress;
  EXPECT_EQ(questions(progress, all), 1u + 4u);  // the newest, then a search: none passed yet
  for (const auto& list : lists) {
    EXPECT_EQ(list.size(), 1u);
  }
  fake().complete(stream);
  EXPECT_EQ(questions(progress, all), 1u);  // the newest has passed: so have the others
  for (const auto& list : lists) {
    EXPECT_TRUE(list.empty());
  }
}

TEST_F(ReleaseStreamProgress, ALaggingStreamIsSearchedNotAskedPointByPoint) {
  cudaStream_t stream = fake().create_stream(0);
  constexpr int kPoints = 16;
  std::vector<StreamPointList> lists(kPoints);
  std::vector<StreamPointList*> all;
  for (int i = 0; i < kPoints; ++i) {
    if (i == kPoints / 2) {
      fake().complete(stream);  // the first half has passed, the second has not
    }
    fake().launch(stream);
    ASSERT_TRUE(lists[static_cast<std::size_t>(i)].push_back(record(stream)));
    all.push_back(&lists[static_cast<std::size_t>(i)]);
  }
  StreamProgress progress;
  EXPECT_EQ(questions(progress, all), 1u + 4u);  // the newest, then log2(16)
  for (int i = 0; i < kPoints; ++i) {
    EXPECT_EQ(lists[static_cast<std::size_t>(i)].empty(), i < kPoints / 2) << i;
  }
  fake().complete(stream);
  EXPECT_EQ(questions(progress, all), 1u);
  for (const auto& list : lists) {
    EXPECT_TRUE(list.empty());
  }
}

// The newest point of a stream is found wherever its list comes in the round (here the lists come
// newest first, two streams interleaved), and only the stream that lags is searched.
TEST_F(ReleaseStreamProgress, OnlyALaggingStreamIsSearchedWhereverItsNewestComes) {
  cudaStream_t idle = fake().create_stream(0);
  cudaStream_t lagging = fake().create_stream(0);
  constexpr int kPoints = 8;
  std::vector<StreamPointList> idle_lists(kPoints);
  std::vector<StreamPointList> lagging_lists(kPoints);
  for (int i = 0; i < kPoints; ++i) {
    if (i == kPoints / 2) {
      fake().complete(lagging);  // its first half has passed, its second has not
    }
    fake().launch(lagging);
    ASSERT_TRUE(idle_lists[static_cast<std::size_t>(i)].push_back(record(idle)));
    ASSERT_TRUE(lagging_lists[static_cast<std::size_t>(i)].push_back(record(lagging)));
  }
  std::vector<StreamPointList*> newest_first;
  for (int i = kPoints; i-- > 0;) {
    newest_first.push_back(&lagging_lists[static_cast<std::size_t>(i)]);
    newest_first.push_back(&idle_lists[static_cast<std::size_t>(i)]);
  }
  StreamProgress progress;
  // The idle stream's newest; the lagging stream's newest, then a search of the 7 older ones.
  EXPECT_EQ(questions(progress, newest_first), 1u + 1u + 3u);
  for (int i = 0; i < kPoints; ++i) {
    EXPECT_TRUE(idle_lists[static_cast<std::size_t>(i)].empty()) << i;
    EXPECT_EQ(lagging_lists[static_cast<std::size_t>(i)].empty(), i < kPoints / 2) << i;
  }
  fake().complete(lagging);
  EXPECT_EQ(questions(progress, newest_first), 1u);
  for (const auto& list : lagging_lists) {
    EXPECT_TRUE(list.empty());
  }
}

// Orders of two threads are not comparable: the newest of one thread says nothing of the other's.
TEST_F(ReleaseStreamProgress, PointsOfAnotherThreadAreAskedApart) {
  cudaStream_t stream = fake().create_stream(0);
  StreamPointList mine;
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(mine.push_back(record(stream)));  // the stream is idle: each has passed
  }
  fake().launch(stream);
  StreamPointList theirs;
  std::thread([&] { ASSERT_TRUE(theirs.push_back(record(stream))); }).join();
  StreamProgress progress;
  (void)questions(progress, {&mine, &theirs});
  EXPECT_TRUE(mine.empty());
  EXPECT_EQ(theirs.size(), 1u) << "a later point of another thread taken for passed";
  fake().complete(stream);
  (void)questions(progress, {&theirs});
  EXPECT_TRUE(theirs.empty());
}

TEST_F(ReleaseStreamProgress, APointKnownToHavePassedNeedsNoQuestion) {
  cudaStream_t stream = fake().create_stream(0);
  StreamPointList older;
  StreamPointList newer;
  ASSERT_TRUE(older.push_back(record(stream)));
  ASSERT_TRUE(newer.push_back(record(stream)));
  StreamProgress progress;
  EXPECT_EQ(questions(progress, {&newer}), 1u);
  EXPECT_TRUE(newer.empty());
  EXPECT_EQ(questions(progress, {&older}), 0u);  // dropped later, recorded before: known
  EXPECT_TRUE(older.empty());
}

TEST_F(ReleaseStreamProgress, OtherStreamsAreAskedApart) {
  cudaStream_t busy = fake().create_stream(0);
  cudaStream_t idle = fake().create_stream(0);
  fake().launch(busy);
  StreamPointList both;
  ASSERT_TRUE(both.push_back(record(idle)));
  ASSERT_TRUE(both.push_back(record(busy)));
  StreamProgress progress;
  EXPECT_EQ(questions(progress, {&both}), 2u);
  EXPECT_EQ(both.size(), 1u);  // the busy stream's point
  EXPECT_EQ(both[0].stream, busy);
  fake().complete(busy);
  (void)questions(progress, {&both});
  EXPECT_TRUE(both.empty());
}

// The whole path: sixteen owners dropped while their stream is busy cost the release thread no
// wait and, once the stream is done, one question per round.
TEST_F(ReleaseStreamProgress, ReleaseThreadAsksAboutTheStreamNotEachPoint) {
  constexpr int kBuffers = 16;
  CountingProducer producer;
  cudaStream_t stream = fake().create_stream(0);
  fake().launch(stream);  // busy: every release below waits
  std::vector<std::unique_ptr<Buffer>> buffers;
  for (int i = 0; i < kBuffers; ++i) {
    buffers.push_back(std::make_unique<Buffer>(producer.make_versioned()));
    ASSERT_TRUE(buffers.back()->set_deallocation_stream(stream));
  }
  const auto waits_before = fake().calls(CudaEntry::kStreamWaitEvent);
  const auto queries_before = fake().calls(CudaEntry::kEventQuery);
  buffers.clear();
  ASSERT_TRUE(wait_for_calls(CudaEntry::kEventQuery, queries_before, 1));
  EXPECT_EQ(producer.deleter_calls(), 0);
  // Counted as the stream completes: rounds that ran before it (the thread may be kept off its CPU
  // between two lines here, as under a sanitizer on two busy cores) are not the ones bounded below.
  const auto queries_at_complete = fake().complete_counting(stream, CudaEntry::kEventQuery);
  flush_deferred_releases();
  EXPECT_EQ(producer.deleter_calls(), kBuffers);
  EXPECT_EQ(fake().calls(CudaEntry::kStreamWaitEvent), waits_before);  // nothing fanned in
  // At most a round in progress (its search) and the one that found the stream done.
  EXPECT_LE(fake().calls(CudaEntry::kEventQuery) - queries_at_complete, 1u + 5u + 1u);
}

TEST_F(ReleaseStreamProgress, SlowStreamDoesNotHoldBackOthers) {
  CountingProducer slow_producer;
  CountingProducer fast_producer;
  cudaStream_t slow = fake().create_stream(0);
  cudaStream_t fast = fake().create_stream(0);
  fake().launch(slow);
  fake().launch(fast);
  {
    Buffer slow_buffer(slow_producer.make_versioned());
    Buffer fast_buffer(fast_producer.make_versioned());
    ASSERT_TRUE(slow_buffer.set_deallocation_stream(slow));
    ASSERT_TRUE(fast_buffer.set_deallocation_stream(fast));
  }
  fake().complete(fast);
  EXPECT_TRUE(
      eventually([&] { return fast_producer.deleter_calls() == 1; }, std::chrono::seconds(5)));
  EXPECT_EQ(slow_producer.deleter_calls(), 0);
  fake().complete(slow);
  flush_deferred_releases();
  EXPECT_EQ(slow_producer.deleter_calls(), 1);
}

TEST_F(ReleaseStreamProgress, PointsOnTwoDevicesWaitForBoth) {
  fake().reset(2);
  CountingProducer producer;
  cudaStream_t on_zero = fake().create_stream(0);
  cudaStream_t on_one = fake().create_stream(1);
  fake().launch(on_zero);
  fake().launch(on_one);
  {
    Buffer buffer(producer.make_versioned());
    ASSERT_TRUE(buffer.set_deallocation_stream(on_zero));
    ASSERT_TRUE(buffer.set_deallocation_stream(on_one));
  }
  fake().complete(on_zero);
  EXPECT_FALSE(
      eventually([&] { return producer.deleter_calls() != 0; }, std::chrono::milliseconds(20)));
  fake().complete(on_one);
  flush_deferred_releases();
  EXPECT_EQ(producer.deleter_calls(), 1);
}

}  // namespace
}  // namespace holoscan
