// Covers StreamState's readiness across devices against a two-device fake runtime: memory is not
// idle while any device the producer recorded readiness on may still write it.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <memory>

#include "holoscan/deferred_release.hpp"
#include "holoscan/detail/stream_state.hpp"
#include "holoscan/dlpack.hpp"
#include "support/counting_producer.hpp"
#include "support/fake_cuda_test.hpp"

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

}  // namespace
}  // namespace holoscan
