// After warm-up the stream hooks create no CUDA events and take no heap memory: the test binary
// replaces the global operator new (support/allocation_hooks) to count this thread's calls
// between two markers.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <holoscan/deferred_release.hpp>
#include <holoscan/dlpack.hpp>
#include <holoscan/event_pool.hpp>
#include <holoscan/tensor.hpp>
#include <memory>

#include "gpu/gpu_test_fixture.hpp"
#include "gpu/kernels.hpp"
#include "support/allocation_hooks.hpp"

namespace holoscan::test {
namespace {

constexpr std::int64_t kElements = 1 << 12;
constexpr int kRounds = 1000;
constexpr std::size_t kReservedEvents = 16;

class HotPathTest : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) {
      return;
    }
    HDL_ASSERT_CUDA(cudaGetDevice(&device_));
    producer_ = make_stream();
    consumer_a_ = make_stream();
    consumer_b_ = make_stream();
    data_ = std::make_unique<DeviceArray<std::uint32_t>>(kElements);
    results_ = std::make_unique<DeviceArray<CheckResult>>(2 * (kRounds + 1));
    ASSERT_NE(data_->get(), nullptr);
    ASSERT_NE(results_->get(), nullptr);
    auto reserved = reserve_stream_events(device_, kReservedEvents);
    ASSERT_TRUE(reserved.has_value()) << reserved.error().message;
    ASSERT_GE(created_stream_events(device_), kReservedEvents);
  }

  DeviceTensorSpec spec() {
    return DeviceTensorSpec{data_->get(), kElements, device_, &probe_, /*free_data=*/false};
  }

  int device_ = 0;
  cudaStream_t producer_ = nullptr;
  cudaStream_t consumer_a_ = nullptr;
  cudaStream_t consumer_b_ = nullptr;
  // Made in SetUp: without a device, construction must not touch CUDA.
  std::unique_ptr<DeviceArray<std::uint32_t>> data_;
  std::unique_ptr<DeviceArray<CheckResult>> results_;
  DeleterProbe probe_;
};

// Without this the zero counts below could come from a counter that never counts.
TEST_F(HotPathTest, CounterSeesAnAllocation) {
  std::uint64_t calls = 0;
  {
    NewCounter counter;
    void* volatile p = ::operator new(64);
    ::operator delete(p);
    calls = counter.calls();
  }
  EXPECT_EQ(calls, 1u);
}

// Fresh owner each round, as a pipeline would have; the flush per round bounds the events in
// flight, so that the pool never grows merely because the host ran ahead of the GPU.
TEST_F(HotPathTest, BufferHooksCreateNoEventsAndAllocateNothing) {
  std::uint64_t hook_allocations = 0;
  int failed_round = -1;
  std::size_t events_after_warm_up = 0;
  for (int round = 0; round <= kRounds; ++round) {
    if (round == 1) {
      events_after_warm_up = created_stream_events(device_);
    }
    const auto seed = static_cast<std::uint32_t>(round);
    const auto slot = static_cast<std::size_t>(2 * round);
    auto buffer =
        std::make_shared<DLManagedMemoryBufferVersioned>(make_versioned_device_tensor(spec()));
    HDL_ASSERT_CUDA(launch_slow_fill(data_->get(), kElements, seed, 0, producer_));
    bool ok = true;
    {
      NewCounter counter;
      ok = buffer->set_readiness_stream(producer_) && ok;
      ok = buffer->synchronize_for_consumer(consumer_a_).has_value() && ok;
      ok = buffer->synchronize_for_consumer(consumer_b_).has_value() && ok;
      if (round > 0) {
        hook_allocations += counter.calls();
      }
    }
    HDL_ASSERT_CUDA(
        launch_check(data_->get(), kElements, seed, 0, results_->get(slot), consumer_a_));
    HDL_ASSERT_CUDA(
        launch_check(data_->get(), kElements, seed, 0, results_->get(slot + 1), consumer_b_));
    {
      NewCounter counter;
      ok = buffer->set_deallocation_stream(consumer_a_) && ok;
      ok = buffer->set_deallocation_stream(consumer_b_) && ok;
      ok = buffer->set_deallocation_stream(consumer_a_) && ok;  // moves a point forward
      if (round > 0) {
        hook_allocations += counter.calls();
      }
    }
    buffer.reset();
    flush_deferred_releases();
    if (!ok && failed_round < 0) {
      failed_round = round;
    }
  }
  EXPECT_EQ(failed_round, -1) << "a hook failed in round " << failed_round;
  EXPECT_EQ(created_stream_events(device_), events_after_warm_up);
  EXPECT_EQ(hook_allocations, 0u);
  EXPECT_EQ(probe_.calls(), kRounds + 1);
  // The hooks also ordered every round: each consumer saw its round's pattern.
  std::uint32_t mismatches = 0;
  for (const CheckResult& r : results_->to_host()) {
    mismatches += r.mismatches;
  }
  EXPECT_EQ(mismatches, 0u);
}

// The same through Tensor handles, plus the claim traffic of copying a handle.
TEST_F(HotPathTest, TensorHooksAndHandleCopiesAllocateNothing) {
  std::uint64_t hook_allocations = 0;
  int failed_round = -1;
  std::size_t events_after_warm_up = 0;
  for (int round = 0; round <= kRounds; ++round) {
    if (round == 1) {
      events_after_warm_up = created_stream_events(device_);
    }
    const auto seed = static_cast<std::uint32_t>(round + 7);
    const auto slot = static_cast<std::size_t>(2 * round);
    auto imported = make_tensor_from_dlpack_versioned(make_versioned_device_tensor(spec()));
    ASSERT_TRUE(imported.has_value()) << imported.error().message;
    Tensor tensor = std::move(*imported);
    HDL_ASSERT_CUDA(launch_slow_fill(data_->get(), kElements, seed, 0, producer_));
    bool ok = true;
    {
      NewCounter counter;
      ok = tensor.set_readiness_stream(producer_) && ok;
      ok = tensor.synchronize_for_consumer_stream(consumer_a_).has_value() && ok;
      ok = tensor.synchronize_for_consumer_stream(consumer_b_).has_value() && ok;
      Tensor copy = tensor;
      copy = Tensor();
      if (round > 0) {
        hook_allocations += counter.calls();
      }
    }
    HDL_ASSERT_CUDA(
        launch_check(data_->get(), kElements, seed, 0, results_->get(slot), consumer_a_));
    HDL_ASSERT_CUDA(
        launch_check(data_->get(), kElements, seed, 0, results_->get(slot + 1), consumer_b_));
    {
      NewCounter counter;
      ok = tensor.set_deallocation_stream(consumer_a_) && ok;
      ok = tensor.set_deallocation_stream(consumer_b_) && ok;
      if (round > 0) {
        hook_allocations += counter.calls();
      }
    }
    tensor = Tensor();
    flush_deferred_releases();
    if (!ok && failed_round < 0) {
      failed_round = round;
    }
  }
  EXPECT_EQ(failed_round, -1) << "a hook failed in round " << failed_round;
  EXPECT_EQ(created_stream_events(device_), events_after_warm_up);
  EXPECT_EQ(hook_allocations, 0u);
  EXPECT_EQ(probe_.calls(), kRounds + 1);
  std::uint32_t mismatches = 0;
  for (const CheckResult& r : results_->to_host()) {
    mismatches += r.mismatches;
  }
  EXPECT_EQ(mismatches, 0u);
}

}  // namespace
}  // namespace holoscan::test
