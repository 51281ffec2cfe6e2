#pragma once
/**
 * @file
 * @brief A TensorMemoryReference with real claim counting and readiness/deallocation streams.
 */
#include <dlpack/dlpack.h>

#include <cstdint>

#include "holoscan/detail/abi.hpp"
#include "holoscan/detail/handle_claims.hpp"
#include "holoscan/detail/stream_state.hpp"
#include "holoscan/tensor_memory_reference.hpp"

namespace holoscan {

namespace detail {
/**
 * @brief Calls `managed->deleter(managed)`. A C++ producer can throw through that C function
 *        pointer: the exception is contained (never rethrown), reported on stderr and counted in
 *        failed_releases(); the deleter counts as run and is never called again.
 */
HOLOSCAN_DLPACK_ABI void run_producer_deleter(DLManagedTensorVersioned* managed) noexcept;
/** @brief run_producer_deleter() for a legacy managed tensor. */
HOLOSCAN_DLPACK_ABI void run_producer_deleter(DLManagedTensor* managed) noexcept;
}  // namespace detail

/**
 * @brief The hooks of TensorMemoryReference implemented for real, shared by every owner here.
 *
 * - Claims: one atomic per retain/release; an unpaired release is counted, never wrapped.
 * - Readiness: set_readiness_stream records one pooled event on the producer stream; each other
 *   consumer stream then costs one cudaStreamWaitEvent, the producer stream itself none.
 * - Deallocation: every stream given is honoured (fan-out); a derived owner releases its memory
 *   through release_when_safe(), which defers the release until the GPU passed every point,
 *   the readiness point included.
 * - Capture: set_readiness_stream and set_deallocation_stream return false on a stream that is
 *   being captured into a CUDA graph (a captured event cannot be waited on from outside the graph
 *   and a graph may replay after the owner is gone): keep such memory alive for the graph's life.
 *   synchronize_for_consumer on a capturing stream returns kFailure
 *   (cudaErrorStreamCaptureIsolation, and CUDA invalidates that capture): synchronize first.
 */
class HOLOSCAN_DLPACK_ABI StreamTrackedReference : public TensorMemoryReference {
 public:
  StreamTrackedReference() = default;
  /** @brief Returns the stream events still held; derived owners release their memory first. */
  ~StreamTrackedReference() override = default;

  /** @brief Adds one handle claim (one relaxed atomic increment). */
  void retain_tensor_handle() noexcept override { claims_.retain(); }
  /** @brief Drops one handle claim; an unpaired release is counted instead of wrapping. */
  void release_tensor_handle() noexcept override { claims_.release(); }

  /** @brief Records a deallocation point on `stream` (device-correct); false under capture. */
  bool set_deallocation_stream(cudaStream_t stream) override {
    return streams_.set_deallocation_stream(stream);
  }
  /** @brief Always true: reuse waits for every recorded deallocation point. */
  bool tracks_deallocation_stream() const noexcept override { return true; }

  /** @brief Records the readiness point on `stream`; false, state unchanged, on failure. */
  bool set_readiness_stream(cudaStream_t stream) override {
    return streams_.set_readiness_stream(stream);
  }
  /** @brief True once a readiness point has been recorded. */
  bool has_readiness_stream_contract() const noexcept override { return streams_.has_readiness(); }
  /** @brief The stream given to the last successful set_readiness_stream, or null. */
  cudaStream_t readiness_stream() const noexcept override { return streams_.readiness_stream(); }

  /** @brief One cudaStreamWaitEvent on `consumer_stream`; none for the readiness stream itself. */
  expected<void, Error> synchronize_for_consumer(cudaStream_t consumer_stream) override {
    return streams_.synchronize_for_consumer(consumer_stream);
  }
  /** @brief Blocks until the readiness point completed; no-op without one. */
  expected<void, Error> synchronize_for_host() override { return streams_.synchronize_for_host(); }

  /** @brief Handle claims held now. */
  std::int64_t handle_claims() const noexcept { return claims_.count(); }
  /** @brief Releases that came without a matching retain (a caller bug, reported here). */
  std::uint64_t unpaired_releases() const noexcept { return claims_.unpaired_releases(); }
  /** @brief Deallocation points recorded and not yet handed to a release. */
  std::size_t deallocation_point_count() const noexcept {
    return streams_.deallocation_point_count();
  }

 protected:
  /** @brief Signature of a release action; it must not throw. */
  using ReleaseFunction = void (*)(void* context) noexcept;

  /**
   * @brief Runs `release(context)` exactly once, after every deallocation point completed.
   *
   * Runs it now when no point is pending; otherwise queues it to the library's release thread and
   * returns at once. `release` may be null, in which case only the events are given back.
   */
  void release_when_safe(ReleaseFunction release, void* context) noexcept;

  /**
   * @brief release_when_safe for a DLPack managed tensor: its deleter, when it has one. A deleter
   *        that throws is contained (see detail::run_producer_deleter), inline as on the release
   *        thread.
   */
  template <class Managed>
  void release_managed_when_safe(Managed* managed) noexcept {
    if (managed == nullptr || managed->deleter == nullptr) {
      release_when_safe(nullptr, nullptr);
      return;
    }
    release_when_safe(
        [](void* context) noexcept {
          detail::run_producer_deleter(static_cast<Managed*>(context));
        },
        managed);
  }

  /** @brief Claim counting, for derived owners that decide reuse themselves. */
  detail::HandleClaims claims_;
  /** @brief Stream points, for derived owners that decide reuse themselves. */
  detail::StreamState streams_;
};

}  // namespace holoscan
