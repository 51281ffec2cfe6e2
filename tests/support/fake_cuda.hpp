#pragma once
// A CPU simulation of the CUDA runtime, installed through the library's CUDA table, so that the
// release paths and every CUDA failure can be tested without a GPU and without timing.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "cuda/cuda_api.hpp"  // the table's type carries the library's ABI tag: no forward declaration

namespace holoscan::test {

/** @brief The entries of the library's CUDA table, for fault injection and call counters. */
enum class CudaEntry : int {
  kEventRecord,
  kStreamWaitEvent,
  kEventQuery,
  kEventSynchronize,
  kEventCreateWithFlags,
  kEventDestroy,
  kGetDevice,
  kSetDevice,
  kStreamGetDevice,
  kStreamIsCapturing,
  kThreadExchangeStreamCaptureMode,
  kMalloc,
  kFree,
  kGetLastError,
  kStreamSynchronize,
  kPointerGetAttributes,
  kStreamGetId,
  kStreamCreateWithFlags,
  kMallocAsync,
  kFreeAsync,
  kMallocHost,
  kFreeHost,
  kMallocManaged,
  kMemcpyAsync,
  kMemcpy2DAsync,
  kCount,  ///< Number of entries, not an entry.
};

/**
 * @brief Thread-safe simulation of devices, streams and events (one per process, never destroyed).
 *
 * A stream has a launched position (work queued with launch()) and a completed position, which
 * only complete() moves forward: the test decides when the "GPU" finishes. An event recorded on a
 * stream takes the stream's launched position and is done once the stream completed up to it, so
 * an event recorded on an idle stream is done at once, as in CUDA. cudaStreamWaitEvent orders as
 * in CUDA: work (and events) queued on the waiting stream afterwards pass only once the waited
 * event has.
 * A copy (cudaMemcpyAsync, cudaMemcpy2DAsync) or a cudaFreeAsync is done by the "GPU" once its
 * stream passes it: at once on an idle stream, otherwise when complete() lets the stream (and every
 * event it waits for) get there. Memory the fake hands out is host memory, reported by
 * cudaPointerGetAttributes as the kind it stands for.
 * The handles nullptr, cudaStreamLegacy and cudaStreamPerThread all name one default stream per
 * device, that of the calling thread's current device. The current device and the capture mode are
 * per thread, as in CUDA, and survive reset().
 */
class FakeCuda {
 public:
  /** @brief The simulation (created on first use, never destroyed: late calls stay valid). */
  static FakeCuda& instance();
  /** @brief The CUDA table whose entries call into the simulation. */
  static const detail::CudaApi& table() noexcept;

  /** @brief Forgets every stream, event, allocation, fault and counter; `devices` devices. */
  void reset(int devices);

  /** @brief A new stream on `device` (the handle stays unique for the life of the process). */
  cudaStream_t create_stream(int device);
  /** @brief Every later call naming `stream` fails with cudaErrorInvalidResourceHandle; work
   *         already queued on it still completes with complete(), as in CUDA. */
  void destroy_stream(cudaStream_t stream);
  /**
   * @brief CUDA may give a destroyed stream's handle to the next stream made: from now on
   *        `destroyed`'s handle names a new stream of `device` (a new id, nothing queued, no
   *        wait), while the work queued on the old one still completes with complete_all().
   */
  cudaStream_t reuse_stream_handle(cudaStream_t destroyed, int device);
  /** @brief Queues work on `stream`: events recorded from now on wait for complete(). */
  void launch(cudaStream_t stream);
  /** @brief The GPU passes everything queued on `stream` so far. */
  void complete(cudaStream_t stream);
  /**
   * @brief complete(), returning calls(`entry`) at that instant: no call slips in between, however
   *        long the caller's thread is kept off its CPU.
   */
  std::uint64_t complete_counting(cudaStream_t stream, CudaEntry entry);
  /** @brief complete() for every stream, default streams included. */
  void complete_all();
  /**
   * @brief Sets what cudaStreamIsCapturing reports for `stream`. While a capture is active (taken
   *        for one begun in global mode), an event query from a thread in global capture mode is
   *        refused with cudaErrorStreamCaptureUnsupported and invalidates it, as in CUDA.
   */
  void set_capture(cudaStream_t stream, cudaStreamCaptureStatus status);

  /** @brief The next `count` calls of `entry` fail with `error` (and set the last error). */
  void fail_next(CudaEntry entry, cudaError_t error, int count = 1);
  /** @brief fail_next() once `skip` more calls of `entry` have succeeded (calls entered from
   *         then on count; a cudaEventSynchronize already waiting does not). */
  void fail_after(CudaEntry entry, int skip, cudaError_t error, int count = 1);
  /** @brief Disarms every fault armed with fail_next(). */
  void clear_faults();
  /** @brief Calls of `entry` since reset(), failed ones included. */
  std::uint64_t calls(CudaEntry entry) const noexcept;

  /** @brief Events created and not destroyed. */
  std::size_t live_events() const;
  /** @brief Memory handed out (cudaMalloc, cudaMallocAsync, cudaMallocHost, cudaMallocManaged)
   *         and not freed; a cudaFreeAsync counts once its stream passed it. */
  std::size_t live_allocations() const;
  /** @brief The calling thread's current device. */
  int current_device() const noexcept;
  /** @brief The calling thread's last error, left as it is (cudaPeekAtLastError). */
  cudaError_t last_error() const noexcept;

  /** @brief The runtime's name of `status` (its enumerator), or null for one the fake does not
   *         name yet (fake_cuda_errors.cpp); the real runtime is never asked. */
  static const char* error_name(cudaError_t status) noexcept;
  /** @brief What the fake's cudaGetErrorString says of `status`. */
  static const char* error_description(cudaError_t status) noexcept;

  struct State;  ///< Devices, streams, events, faults and counters (defined in fake_cuda.cpp).

 private:
  FakeCuda();
  State* state_;  // leaked with the instance
};

/**
 * @brief Installs the fake runtime (reset to `devices` devices) for one scope.
 *
 * On entry it destroys the events pooled under the previous table (real events must never reach
 * the fake). On exit it completes every stream, waits for the deferred releases, destroys the
 * pooled events through the fake, reports (as a test failure) any fake event or allocation still
 * held, and puts the previous CUDA table back.
 */
class FakeCudaScope {
 public:
  /** @brief Resets the simulation and installs it. */
  explicit FakeCudaScope(int devices = 1);
  /** @brief Drains what the library still holds of the fake and restores the previous table. */
  ~FakeCudaScope();
  FakeCudaScope(const FakeCudaScope&) = delete;
  FakeCudaScope& operator=(const FakeCudaScope&) = delete;

  /** @brief The simulation. */
  FakeCuda& fake() const noexcept { return FakeCuda::instance(); }
  /** @brief The simulation. */
  FakeCuda* operator->() const noexcept { return &FakeCuda::instance(); }

 private:
  const detail::CudaApi* previous_;
};

}  // namespace holoscan::test
