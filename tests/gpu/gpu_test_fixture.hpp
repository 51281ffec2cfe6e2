#pragma once
// The GPU test fixture (skip without a device, fresh non-blocking streams, clean teardown) and
// device-memory DLPack producers whose deleters cudaFree and report the streams' state.
#include <cuda_runtime.h>
#include <dlpack/dlpack.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "gpu/kernels.hpp"

/** @brief Fails the test (fatally) unless `expr` yields cudaSuccess; works for launchers' ints. */
#define HDL_ASSERT_CUDA(expr)                                                              \
  do {                                                                                     \
    const cudaError_t hdl_status_ = static_cast<cudaError_t>(expr);                        \
    ASSERT_EQ(hdl_status_, cudaSuccess) << #expr << ": " << cudaGetErrorName(hdl_status_); \
  } while (0)

/** @brief Non-fatal HDL_ASSERT_CUDA. */
#define HDL_EXPECT_CUDA(expr)                                                              \
  do {                                                                                     \
    const cudaError_t hdl_status_ = static_cast<cudaError_t>(expr);                        \
    EXPECT_EQ(hdl_status_, cudaSuccess) << #expr << ": " << cudaGetErrorName(hdl_status_); \
  } while (0)

namespace holoscan::test {

/**
 * @brief What a device tensor's deleter saw: how often it ran, and each watched stream's
 *        cudaStreamQuery result at that moment (so a test can prove the GPU had finished).
 */
class DeleterProbe {
 public:
  /** @brief Streams whose state the deleter records; set before the owner can be destroyed. */
  void watch(std::vector<cudaStream_t> streams);
  /** @brief Deleter calls so far. */
  int calls() const noexcept { return calls_.load(std::memory_order_acquire); }
  /** @brief cudaStreamQuery of each watched stream at the last deleter call. */
  std::vector<cudaError_t> stream_status_at_delete() const;
  /** @brief Called by the deleter: records the streams' state, then counts the call. */
  void on_delete();

 private:
  mutable std::mutex mutex_;
  std::vector<cudaStream_t> watched_;
  std::vector<cudaError_t> status_at_delete_;
  std::atomic<int> calls_{0};
};

/** @brief A 1-D uint32 device tensor over `data`; its deleter reports to `probe`, then frees. */
struct DeviceTensorSpec {
  std::uint32_t* data = nullptr;  ///< Device memory of `device`.
  std::int64_t elements = 0;      ///< Extent of the only dimension.
  int device = 0;                 ///< CUDA device of `data`.
  DeleterProbe* probe = nullptr;  ///< Must outlive the tensor; may be null.
  bool free_data = true;          ///< cudaFree(data) in the deleter.
};

/** @brief A DLPack >= 1.0 managed tensor for `spec`; ownership goes to the caller. */
DLManagedTensorVersioned* make_versioned_device_tensor(const DeviceTensorSpec& spec);
/** @brief A legacy managed tensor for `spec`; ownership goes to the caller. */
DLManagedTensor* make_legacy_device_tensor(const DeviceTensorSpec& spec);

/** @brief cudaMalloc of `elements` uint32 on the current device, zeroed; null on failure.
 *         Call it before launching work: it synchronizes the device. */
std::uint32_t* device_alloc_zeroed(std::int64_t elements);

/** @brief cudaStreamQuery that keeps cudaErrorNotReady (a state, not a failure) out of the
 *         thread's last-error slot, after checking that no earlier error was left there. */
cudaError_t query_stream(cudaStream_t stream);

/**
 * @brief Zeroed device memory freed at scope exit (results of consumer kernels, scratch).
 *
 * Create it before launching the work under test: cudaMalloc and cudaFree may synchronize the
 * device. The zeroing waits only for the legacy stream, never for the tests' non-blocking streams.
 */
template <class T>
class DeviceArray {
 public:
  explicit DeviceArray(std::size_t count) : count_(count) {
    void* p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, count * sizeof(T)), cudaSuccess);
    data_ = static_cast<T*>(p);
    if (data_ != nullptr) {
      EXPECT_EQ(cudaMemsetAsync(data_, 0, count * sizeof(T), cudaStreamLegacy), cudaSuccess);
      EXPECT_EQ(cudaStreamSynchronize(cudaStreamLegacy), cudaSuccess);
    }
  }
  ~DeviceArray() { release(); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  /** @brief Device address of element `i`. */
  T* get(std::size_t i = 0) const noexcept { return data_ + i; }
  std::size_t size() const noexcept { return count_; }
  /** @brief Element `i`, copied after the caller synchronized the stream that wrote it. */
  T at(std::size_t i) const {
    T value{};
    EXPECT_EQ(cudaMemcpy(&value, data_ + i, sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return value;
  }
  /** @brief Every element, copied after the caller synchronized the streams that wrote them. */
  std::vector<T> to_host() const {
    std::vector<T> host(count_);
    if (data_ != nullptr) {
      EXPECT_EQ(cudaMemcpy(host.data(), data_, count_ * sizeof(T), cudaMemcpyDeviceToHost),
                cudaSuccess);
    }
    return host;
  }

 private:
  void release() noexcept {
    if (data_ != nullptr) {
      (void)cudaFree(data_);
    }
    data_ = nullptr;
  }
  T* data_ = nullptr;
  std::size_t count_ = 0;
};

/**
 * @brief Skips without a CUDA device (with the runtime's reason); otherwise hands out
 *        non-blocking streams and checks, at the end, that nothing failed or stayed queued.
 */
class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  /** @brief A new cudaStreamNonBlocking stream on `device` (-1: current), destroyed in TearDown. */
  cudaStream_t make_stream(int device = -1);
  /** @brief Devices the runtime reports. */
  int device_count() const noexcept { return device_count_; }
  /** @brief The device current when the test started (restored in TearDown). */
  int original_device() const noexcept { return original_device_; }

  /**
   * @brief Whether kernels of two independent streams overlap here (cached per process).
   *
   * Race demonstrations need it; compute-sanitizer serializes launches, and there the premise of
   * such a test does not hold, so it skips instead of failing for the wrong reason.
   */
  static bool streams_run_concurrently();

 private:
  bool active_ = false;
  int original_device_ = 0;
  int device_count_ = 0;
  std::vector<std::pair<int, cudaStream_t>> streams_;
};

}  // namespace holoscan::test
