// Covers producer deleters that throw (DLPack deleters are C function pointers, but a C++
// producer can throw through one): inline or on the release thread, the process goes on, the
// deleter counts as run once, and the failure is reported on stderr and counted.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <string>

#include "holoscan/deferred_release.hpp"
#include "holoscan/dlpack.hpp"
#include "support/callback_tensor.hpp"
#include "support/fake_cuda_test.hpp"

namespace holoscan {
namespace {

using test::make_callback_tensor;

class ThrowingDeleter : public test::FakeCudaTest {};

// A versioned tensor whose deleter (after freeing it) counts the call in `calls`, then throws.
DLManagedTensorVersioned* throwing_tensor(std::atomic<int>& calls) {
  return make_callback_tensor([&calls] {
    calls.fetch_add(1);
    throw std::runtime_error("producer failed to free");
  });
}

// A legacy tensor whose deleter counts the call in the int its manager_ctx names, then throws a
// value that is no std::exception.
DLManagedTensor* throwing_legacy_tensor(std::atomic<int>& calls) {
  auto* managed = new DLManagedTensor{};
  managed->dl_tensor.device = {kDLCPU, 0};
  managed->dl_tensor.dtype = {kDLFloat, 32, 1};
  managed->manager_ctx = &calls;
  managed->deleter = [](DLManagedTensor* self) {
    auto* counter = static_cast<std::atomic<int>*>(self->manager_ctx);
    delete self;
    counter->fetch_add(1);
    throw 42;
  };
  return managed;
}

const std::string kReport = "holoscan-dlpack: a DLPack producer's deleter threw: ";

// Runs `drop`, which lets an owner go whose deleter throws and counts into `calls`, then checks:
// one call, one more failure counted, and `report` on stderr.
template <class Drop>
void expect_contained(Drop drop, const std::atomic<int>& calls, const std::string& report) {
  const std::uint64_t failed = failed_releases();
  ::testing::internal::CaptureStderr();
  drop();
  const std::string printed = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(calls.load(), 1);
  EXPECT_EQ(failed_releases(), failed + 1);
  EXPECT_NE(printed.find(kReport + report), std::string::npos) << printed;
}

TEST_F(ThrowingDeleter, InlineThrowIsContainedReportedAndCounted) {
  std::atomic<int> calls{0};
  expect_contained([&] { DLManagedMemoryBufferVersioned buffer(throwing_tensor(calls)); }, calls,
                   "producer failed to free; contained");
}

TEST_F(ThrowingDeleter, ThrowOnTheReleaseThreadIsContainedAndTheThreadGoesOn) {
  std::atomic<int> calls{0};
  std::atomic<int> later_calls{0};
  cudaStream_t stream = fake().create_stream(0);
  expect_contained(
      [&] {
        test::drop_pending(fake(), throwing_tensor(calls), stream);
        test::drop_pending(fake(), make_callback_tensor([&] { later_calls.fetch_add(1); }), stream);
        fake().complete(stream);
        flush_deferred_releases();
      },
      calls, "producer failed to free; contained");
  EXPECT_EQ(later_calls.load(), 1);  // the release thread survived the throw
  EXPECT_EQ(pending_deferred_releases(), 0u);
}

TEST_F(ThrowingDeleter, LegacyDeleterThrowingAnythingIsContained) {
  std::atomic<int> calls{0};
  expect_contained([&] { DLManagedMemoryBuffer buffer(throwing_legacy_tensor(calls)); }, calls,
                   "an exception not derived from std::exception");
}

TEST_F(ThrowingDeleter, ReportsStopAfterSixteenButTheCountGoesOn) {
  std::atomic<int> calls{0};
  const std::uint64_t failed = failed_releases();
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 20; ++i) {
    DLManagedMemoryBufferVersioned buffer(throwing_tensor(calls));
  }
  const std::string printed = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(calls.load(), 20);
  EXPECT_EQ(failed_releases(), failed + 20);
  // 16 lines in the process's life (earlier tests of this process may have printed some), the
  // last one saying that the rest are only counted.
  std::uint64_t lines = 0;
  for (std::size_t at = printed.find(kReport); at != std::string::npos;
       at = printed.find(kReport, at + 1)) {
    ++lines;
  }
  EXPECT_EQ(lines, failed >= 16 ? 0 : 16 - failed) << printed;
  EXPECT_EQ(printed.find("further ones are only counted") != std::string::npos, failed < 16);
}

}  // namespace
}  // namespace holoscan
