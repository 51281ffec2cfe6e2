// CUDA may give a destroyed stream's handle to the next stream made (its work still runs after
// cudaStreamDestroy). A stream is known by its id as well as its handle, so that a new stream
// under an old handle is never taken for the stream that recorded the readiness, waited for it,
// or recorded a deallocation point: its work is not ordered after theirs.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>

#include "holoscan/deferred_release.hpp"
#include "holoscan/dlpack.hpp"
#include "stream/stream_point.hpp"
#include "stream/stream_state.hpp"
#include "support/counting_producer.hpp"
#include "support/fake_cuda_test.hpp"

namespace holoscan {
namespace {

class StreamHandleReuse : public test::FakeCudaTest {
 protected:
  // Destroys `stream` (its queued work still runs) and gives its handle to a new stream.
  cudaStream_t reuse(cudaStream_t stream) {
    fake().destroy_stream(stream);
    cudaStream_t reused = fake().reuse_stream_handle(stream, 0);
    EXPECT_EQ(reused, stream);
    return reused;
  }

  // A deallocation point on a new stream under the producer's old handle is no point after the
  // readiness: the state stays busy until the producer's work is done.
  void expect_a_point_under_the_producers_old_handle_to_wait() {
    cudaStream_t producer = fake().create_stream(0);
    detail::StreamState state;
    fake().launch(producer);
    ASSERT_TRUE(state.set_readiness_stream(producer));
    ASSERT_TRUE(state.set_deallocation_stream(reuse(producer)));

    EXPECT_FALSE(state.poll_idle());  // before the fixes: idle at once while the producer ran
    fake().complete_all();
    EXPECT_TRUE(state.poll_idle());
  }
};

TEST_F(StreamHandleReuse, AConsumerUnderTheProducersOldHandleWaitsForTheProducer) {
  cudaStream_t producer = fake().create_stream(0);
  detail::StreamState state;
  fake().launch(producer);
  ASSERT_TRUE(state.set_readiness_stream(producer));
  cudaStream_t consumer = reuse(producer);

  ASSERT_TRUE(state.synchronize_for_consumer(consumer).has_value());
  // Before the fix: taken for the producer's stream, no wait.
  EXPECT_FALSE(test::later_work_passed(consumer));
  fake().complete_all();
  EXPECT_TRUE(test::later_work_passed(consumer));
}

TEST_F(StreamHandleReuse, APointUnderTheProducersOldHandleDoesNotCoverTheReadiness) {
  expect_a_point_under_the_producers_old_handle_to_wait();
}

TEST_F(StreamHandleReuse, APointUnderAWaitersOldHandleDoesNotCoverTheReadiness) {
  cudaStream_t producer = fake().create_stream(0);
  cudaStream_t waiter = fake().create_stream(0);
  detail::StreamState state;
  fake().launch(producer);
  ASSERT_TRUE(state.set_readiness_stream(producer));
  ASSERT_TRUE(state.synchronize_for_consumer(waiter).has_value());
  ASSERT_TRUE(state.set_deallocation_stream(reuse(waiter)));

  EXPECT_FALSE(state.poll_idle());  // before the fix: idle at once while the producer ran
  fake().complete_all();
  EXPECT_TRUE(state.poll_idle());
}

TEST_F(StreamHandleReuse, TheReleaseWaitsForAProducerWhoseWaitersHandleWasReused) {
  test::CountingProducer producer;
  cudaStream_t producing = fake().create_stream(0);
  cudaStream_t waiter = fake().create_stream(0);
  auto buffer = std::make_unique<DLManagedMemoryBufferVersioned>(producer.make_versioned());
  fake().launch(producing);
  ASSERT_TRUE(buffer->set_readiness_stream(producing));
  ASSERT_TRUE(buffer->synchronize_for_consumer(waiter).has_value());
  ASSERT_TRUE(buffer->set_deallocation_stream(reuse(waiter)));
  buffer.reset();
  EXPECT_FALSE(test::eventually([&] { return producer.deleter_calls() != 0; },
                                std::chrono::milliseconds(50)));

  fake().complete_all();
  flush_deferred_releases();
  EXPECT_EQ(producer.deleter_calls(), 1);
}

TEST_F(StreamHandleReuse, HandOverToANewStreamUnderAnOldHandleWaitsForThePointRecordedThere) {
  cudaStream_t consumer = fake().create_stream(0);
  detail::StreamState state;
  fake().launch(consumer);
  ASSERT_TRUE(state.set_deallocation_stream(consumer));
  cudaStream_t next_user = reuse(consumer);

  ASSERT_TRUE(state.hand_over_to(next_user).has_value());  // stream-ordered pool reuse
  // Before the fix: taken for the consumer's stream, no wait.
  EXPECT_FALSE(test::later_work_passed(next_user));
  fake().complete_all();
  EXPECT_TRUE(test::later_work_passed(next_user));
}

// When CUDA cannot say a stream's id (cudaStreamGetId fails), every explicit stream's id reads 0:
// a new stream under an old handle had the old one's handle, device and id, and was taken for it.
TEST_F(StreamHandleReuse,
       WithoutStreamIdsAPointUnderTheProducersOldHandleDoesNotCoverTheReadiness) {
  fake().fail_next(test::CudaEntry::kStreamGetId, cudaErrorNotSupported, 1000);
  expect_a_point_under_the_producers_old_handle_to_wait();
}

// A thread started after another ended may get the same thread_local addresses; its per-thread
// default stream is another stream all the same, whose work is not ordered after the first's.
TEST_F(StreamHandleReuse, APerThreadStreamOfALaterThreadIsNotTheEndedThreadsStream) {
  const auto key_of_a_new_thread = [] {
    std::uintptr_t key = 0;
    std::thread([&] {
      auto location = detail::locate_stream(cudaStreamPerThread);
      ASSERT_TRUE(location.has_value());
      key = location->thread_key;
    }).join();
    return key;
  };
  const std::uintptr_t first = key_of_a_new_thread();
  const std::uintptr_t second = key_of_a_new_thread();
  EXPECT_NE(first, 0u);
  EXPECT_NE(first, second);  // before the fix: the same key, the address of a thread_local
}

}  // namespace
}  // namespace holoscan
