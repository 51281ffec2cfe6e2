#pragma once
// A GoogleTest fixture that runs each test against the fake CUDA runtime.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <thread>

#include "holoscan/deferred_release.hpp"
#include "holoscan/dlpack.hpp"
#include "stream/stream_state.hpp"
#include "support/fake_cuda.hpp"

namespace holoscan::test {

/** @brief Polls `done` until it holds or `limit` passes; true if it held (never a fixed sleep). */
template <class Predicate>
bool eventually(Predicate done, std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) {
      return false;
    }
    std::this_thread::yield();
  }
  return true;
}

/** @brief Drops an owner of `managed` whose release must wait for work queued on `stream` now. */
inline void drop_pending(FakeCuda& fake, DLManagedTensorVersioned* managed, cudaStream_t stream) {
  DLManagedMemoryBufferVersioned buffer(managed);
  fake.launch(stream);
  ASSERT_TRUE(buffer.set_deallocation_stream(stream));
}

/** @brief Whether work queued on `stream` from now on has passed (a point recorded there says). */
inline bool later_work_passed(cudaStream_t stream) {
  detail::StreamState probe;
  return probe.set_deallocation_stream(stream) && probe.poll_idle();
}

/** @brief Installs the fake runtime for each test; no release may be pending at the start. */
class FakeCudaTest : public ::testing::Test {
 protected:
  /** @brief A fake runtime with `devices` devices. */
  explicit FakeCudaTest(int devices = 1) : scope_(devices) {}

  /** @brief Counts exact from here: the previous test left nothing queued. */
  void SetUp() override { ASSERT_EQ(pending_deferred_releases(), 0u); }

  /** @brief The simulation. */
  FakeCuda& fake() { return scope_.fake(); }

  /** @brief Waits until the fake saw `more` calls of `entry` beyond `since`. */
  bool wait_for_calls(CudaEntry entry, std::uint64_t since, std::uint64_t more) {
    return eventually([&] { return fake().calls(entry) >= since + more; });
  }

 private:
  FakeCudaScope scope_;
};

}  // namespace holoscan::test
