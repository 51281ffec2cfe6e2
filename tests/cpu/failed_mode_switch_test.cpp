// CUDA calls whose failure the library does not report (a capture-mode switch, a device switch on
// the release thread) are retried where it matters and never leave their error as the thread's
// last error. A release thread whose switch to relaxed capture mode failed at its start stayed in
// global mode for good, and its event queries then invalidated other threads' graph captures;
// the failed calls' errors surfaced in the next deleter's (or the caller's own) cudaGetLastError.
// The release thread's cases run in a child (GoogleTest re-executes the test binary), so that the
// failure meets the thread's start and a device it never used.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "cuda/cuda_api.hpp"
#include "holoscan/deferred_release.hpp"
#include "holoscan/dlpack.hpp"
#include "stream/release_queue.hpp"
#include "support/callback_tensor.hpp"
#include "support/counting_producer.hpp"
#include "support/fake_cuda_test.hpp"

namespace holoscan {
namespace {

using test::CudaEntry;
using test::FakeCuda;

class FailedModeSwitch : public test::FakeCudaTest {};

class FailedModeSwitchDeathTest : public test::FakeCudaTest {
 protected:
  FailedModeSwitchDeathTest() : FakeCudaTest(2) {}
  void SetUp() override {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    FakeCudaTest::SetUp();
  }
};

// The release thread's first switch to relaxed mode fails; later, another thread captures in
// global mode while the thread asks about a pending release.
void failed_switch_at_the_release_threads_start(FakeCuda& fake) {
  if (detail::ReleaseQueue::existing() != nullptr) {
    std::_Exit(3);  // not the process's first release
  }
  const cudaStream_t busy = fake.create_stream(0);
  const cudaStream_t captured = fake.create_stream(0);
  std::atomic<int> runs{0};
  std::atomic<int> seen{-1};
  const std::uint64_t switches = fake.calls(CudaEntry::kThreadExchangeStreamCaptureMode);
  fake.fail_next(CudaEntry::kThreadExchangeStreamCaptureMode, cudaErrorUnknown);
  test::drop_pending(fake, test::make_callback_tensor([&] {
                       seen = static_cast<int>(fake.last_error());
                       ++runs;
                     }),
                     busy);  // starts the release thread
  if (!test::eventually([&] {
        return fake.calls(CudaEntry::kThreadExchangeStreamCaptureMode) > switches;
      })) {
    std::_Exit(4);
  }
  fake.clear_faults();
  fake.set_capture(captured, cudaStreamCaptureStatusActive);
  const std::uint64_t queries = fake.calls(CudaEntry::kEventQuery);
  if (!test::eventually([&] { return fake.calls(CudaEntry::kEventQuery) >= queries + 2; })) {
    std::_Exit(5);
  }
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  (void)detail::cuda().stream_is_capturing(captured, &status);
  fake.set_capture(captured, cudaStreamCaptureStatusNone);
  fake.complete(busy);
  flush_deferred_releases();
  std::fprintf(stderr, "capture %d, deleter runs %d, its last error %d\n", static_cast<int>(status),
               runs.load(), seen.load());
  std::_Exit(0);
}

TEST_F(FailedModeSwitchDeathTest, TheReleaseThreadTriesAgainAndLeavesNoErrorForItsDeleters) {
  EXPECT_EXIT(failed_switch_at_the_release_threads_start(fake()), ::testing::ExitedWithCode(0),
              "capture 1, deleter runs 1, its last error 0");
}

// A point on device 1, every cudaSetDevice failing: the release thread's switch to the point's
// device fails (the query still runs), and the deleter must not find that error.
void failed_device_switch_on_the_release_thread(FakeCuda& fake) {
  const cudaStream_t on_1 = fake.create_stream(1);
  std::atomic<int> runs{0};
  std::atomic<int> seen{-1};
  fake.launch(on_1);
  {
    DLManagedMemoryBufferVersioned buffer(test::make_callback_tensor([&] {
      seen = static_cast<int>(fake.last_error());
      ++runs;
    }));
    if (!buffer.set_deallocation_stream(on_1)) {
      std::_Exit(3);
    }
    fake.fail_next(CudaEntry::kSetDevice, cudaErrorUnknown, 1000000);
  }
  const std::uint64_t queries = fake.calls(CudaEntry::kEventQuery);
  if (!test::eventually([&] { return fake.calls(CudaEntry::kEventQuery) >= queries + 2; })) {
    std::_Exit(4);
  }
  fake.complete(on_1);
  flush_deferred_releases();
  fake.clear_faults();
  std::fprintf(stderr, "deleter runs %d, its last error %d\n", runs.load(), seen.load());
  std::_Exit(0);
}

TEST_F(FailedModeSwitchDeathTest, AFailedDeviceSwitchOnTheReleaseThreadLeavesNoErrorForTheDeleter) {
  EXPECT_EXIT(failed_device_switch_on_the_release_thread(fake()), ::testing::ExitedWithCode(0),
              "deleter runs 1, its last error 0");
}

// The host wait succeeds without relaxed mode; the failed switch before it is not the caller's
// last error.
TEST_F(FailedModeSwitch, AHostWaitLeavesNoErrorOfItsFailedSwitchForTheCaller) {
  test::CountingProducer producer;
  const cudaStream_t stream = fake().create_stream(0);
  DLManagedMemoryBufferVersioned buffer(producer.make_versioned());
  ASSERT_TRUE(buffer.set_readiness_stream(stream));
  fake().fail_next(CudaEntry::kThreadExchangeStreamCaptureMode, cudaErrorUnknown);
  ASSERT_TRUE(buffer.synchronize_for_host().has_value());
  fake().clear_faults();
  EXPECT_EQ(fake().last_error(), cudaSuccess);
}

}  // namespace
}  // namespace holoscan
