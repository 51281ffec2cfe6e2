#pragma once
// A thread that plays the GPU for the stress tests: it completes the given fake streams over and
// over, so that points pass at moments no test chooses, while host waits still end.
#include <cuda_runtime_api.h>

#include <atomic>
#include <thread>
#include <utility>
#include <vector>

#include "support/fake_cuda.hpp"

namespace holoscan::test {

/** @brief Completes `streams` of `fake` in turn, from construction until destruction. */
class FakeGpuThread {
 public:
  /** @brief Starts completing `streams`. */
  FakeGpuThread(FakeCuda& fake, std::vector<cudaStream_t> streams)
      : thread_([this, &fake, streams = std::move(streams)] {
          while (!stop_.load(std::memory_order_acquire)) {
            for (cudaStream_t stream : streams) {
              fake.complete(stream);
              std::this_thread::yield();
            }
          }
        }) {}
  /** @brief Stops and joins the thread. */
  ~FakeGpuThread() {
    stop_.store(true, std::memory_order_release);
    thread_.join();
  }
  FakeGpuThread(const FakeGpuThread&) = delete;
  FakeGpuThread& operator=(const FakeGpuThread&) = delete;

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace holoscan::test
