#pragma once
/**
 * @file
 * @brief A TensorMemoryReference with real claim counting and readiness/deallocation streams.
 */
#include <dlpack/dlpack.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "holoscan/export.hpp"
#include "holoscan/tensor_memory_reference.hpp"

namespace holoscan {

namespace detail {
struct HOLOSCAN_DLPACK_ABI StreamTrackedAccess;
struct HOLOSCAN_DLPACK_ABI ReferenceHolds;
}  // namespace detail

/**
 * @brief The hooks of TensorMemoryReference implemented for real, shared by every owner here.
 *
 * - Claims: one atomic per retain/release, up to 2^31 - 1 held at once (more would read as
 *   unpaired releases, and an owner the library made would never be freed); an unpaired release
 *   is counted, never wrapped, and exactly: a release that finds no claim gives back what it
 *   took and takes a claim by compare-exchange only if one is there, so another thread's
 *   retain/release pair landing meanwhile is never counted unpaired. Paired releases keep the
 *   one atomic.
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
class HOLOSCAN_DLPACK_API StreamTrackedReference : public TensorMemoryReference {
 public:
  /** @brief No claim, no point. */
  StreamTrackedReference() noexcept;
  /** @brief Returns the stream events still held; derived owners release their memory first. */
  ~StreamTrackedReference() override;

  /** @brief Adds one handle claim (one relaxed atomic increment). */
  void retain_tensor_handle() noexcept override { claims_.fetch_add(1, std::memory_order_relaxed); }
  /** @brief Drops one handle claim; an unpaired release is counted instead of wrapping. */
  void release_tensor_handle() noexcept override {
    // acq_rel: whoever takes the last claim sees every write made under the others.
    if (static_cast<std::int32_t>(claims_.fetch_sub(1, std::memory_order_acq_rel)) > 0) {
      return;
    }
    release_after_finding_no_claim();
  }

  /** @brief Records a deallocation point on `stream` (device-correct); false under capture. */
  bool set_deallocation_stream(cudaStream_t stream) override;
  /** @brief Always true: reuse waits for every recorded deallocation point. */
  bool tracks_deallocation_stream() const noexcept override { return true; }

  /** @brief Records the readiness point on `stream`; false, state unchanged, on failure. */
  bool set_readiness_stream(cudaStream_t stream) override;
  /** @brief True once a readiness point has been recorded. */
  bool has_readiness_stream_contract() const noexcept override;
  /** @brief The stream given to the last successful set_readiness_stream, or null. */
  cudaStream_t readiness_stream() const noexcept override;

  /** @brief One cudaStreamWaitEvent on `consumer_stream`; none for the readiness stream itself. */
  expected<void, Error> synchronize_for_consumer(cudaStream_t consumer_stream) override;
  /** @brief Blocks until the readiness point completed; no-op without one. */
  expected<void, Error> synchronize_for_host() override;

  /** @brief Handle claims held now (never negative, even while an unpaired release corrects). */
  std::int64_t handle_claims() const noexcept {
    const std::int64_t word = claims_.load(std::memory_order_acquire);
    const std::int32_t claims = static_cast<std::int32_t>(word);
    // An export's hold is a claim too; the shared owner's hold (kOwnerHold) is none.
    return (claims > 0 ? claims : 0) + export_holds_in(word);
  }
  /** @brief Releases that came without a matching retain (a caller bug, reported here). */
  std::uint64_t unpaired_releases() const noexcept {
    return unpaired_.load(std::memory_order_relaxed);
  }
  /** @brief Deallocation points recorded and not yet handed to a release. */
  std::size_t deallocation_point_count() const noexcept;

 protected:
  /** @brief Signature of a release action; it must not throw. */
  using ReleaseFunction = void (*)(void* context) noexcept;

  /**
   * @brief Runs `release(context)` exactly once, after every deallocation point completed.
   *
   * Runs it now when no point is pending; otherwise queues it to the library's release thread and
   * returns at once. `release` may be null, in which case only the events are given back. Called
   * as the owner goes (its destructor), when no other thread can reach the points any more: they
   * are taken without a lock.
   */
  void release_when_safe(ReleaseFunction release, void* context) noexcept;

  /**
   * @brief release_when_safe for a DLPack managed tensor: its deleter, when it has one. A deleter
   *        that throws is contained (reported on stderr, counted in failed_releases(), never run
   *        again), inline as on the release thread.
   */
  void release_managed_when_safe(DLManagedTensorVersioned* managed) noexcept;
  /** @brief release_managed_when_safe for a legacy managed tensor. */
  void release_managed_when_safe(DLManagedTensor* managed) noexcept;

 private:
  friend struct detail::StreamTrackedAccess;
  friend struct detail::ReferenceHolds;
  /** @brief Bytes of the stream points kept in place (checked where they are defined). */
  static constexpr std::size_t kStreamStateBytes = 448;

  /** @brief An export's hold in claims_ (the bits above the claims'). */
  static constexpr std::int64_t kHold = std::int64_t{1} << 32;
  /** @brief The shared owner's hold in claims_ (above 2^24 exports' holds). */
  static constexpr std::int64_t kOwnerHold = std::int64_t{1} << 56;

  /** @brief The exports' holds in a value of claims_ (an unpaired release's borrow undone). */
  static constexpr std::int64_t export_holds_in(std::int64_t word) noexcept {
    return ((word - static_cast<std::int32_t>(word)) & (kOwnerHold - 1)) / kHold;
  }

  // Gives back what a release took from a count it found at zero or below, then takes a claim
  // only if one is there, or counts the release unpaired.
  [[gnu::cold]] void release_after_finding_no_claim() noexcept;

  // The claims stay inline, so that a retain or release is one atomic with no call of its own;
  // the stream points, whose hooks cost a CUDA call anyway, are kept out of sight. The low 32
  // bits count handle claims (signed: negative while an unpaired release is undone); the bits
  // above count holds, for an owner the library made that lives by them (its shared owner's at
  // bit 56, each export's at bit 32; ReferenceHolds::live_by_holds), 0 for every other
  // reference. Such an owner is destroyed by its last hold, whatever claims are left.
  std::atomic<std::int64_t> claims_{0};
  std::atomic<std::uint64_t> unpaired_{0};
  // Set for an owner that lives by its holds: destroys it and gives its memory back.
  void (*dispose_)(StreamTrackedReference* self) noexcept = nullptr;
  alignas(8) unsigned char streams_[kStreamStateBytes];
};

}  // namespace holoscan
