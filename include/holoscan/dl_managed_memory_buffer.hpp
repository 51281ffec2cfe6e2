#pragma once
/**
 * @file
 * @brief DLManagedMemoryBufferVersioned and DLManagedMemoryBuffer: the owners of imported DLPack
 *        tensors (DLPack >= 1.0 and legacy), as Holoscan 5.0 declares them.
 */
#include <dlpack/dlpack.h>

#include "holoscan/export.hpp"
#include "holoscan/stream_tracked_reference.hpp"

namespace holoscan {

namespace detail {
struct HOLOSCAN_DLPACK_ABI ImportOwnerAccess;
}  // namespace detail

/**
 * @brief Wraps the deleter of a DLManagedTensorVersioned (DLPack >= 1.0).
 *
 * Takes ownership of `self`: the producer's deleter runs exactly once, after every recorded
 * deallocation point (and the readiness point) has completed on the GPU; the destructor never
 * blocks on the GPU (a pending release runs on the library's release thread, see
 * flush_deferred_releases()).
 */
class HOLOSCAN_DLPACK_API DLManagedMemoryBufferVersioned : public StreamTrackedReference {
 public:
  /** @brief Takes ownership of `self`; null owns nothing. */
  explicit DLManagedMemoryBufferVersioned(DLManagedTensorVersioned* self);
  /** @brief Runs the producer's deleter once it is safe (now or deferred). */
  ~DLManagedMemoryBufferVersioned() override;
  DLManagedMemoryBufferVersioned(const DLManagedMemoryBufferVersioned&) = delete;
  DLManagedMemoryBufferVersioned& operator=(const DLManagedMemoryBufferVersioned&) = delete;
  DLManagedMemoryBufferVersioned(DLManagedMemoryBufferVersioned&&) = delete;
  DLManagedMemoryBufferVersioned& operator=(DLManagedMemoryBufferVersioned&&) = delete;

  /** @brief The owned managed tensor (null when none); valid while this object lives. */
  DLManagedTensorVersioned* managed_tensor() const noexcept { return self_; }

 private:
  friend struct detail::ImportOwnerAccess;
  DLManagedTensorVersioned* self_ = nullptr;
};

/**
 * @brief Wraps the deleter of a legacy DLManagedTensor (pre-1.0 layout, no version or flags).
 *
 * Same hooks and the same release guarantees as DLManagedMemoryBufferVersioned.
 */
class HOLOSCAN_DLPACK_API DLManagedMemoryBuffer : public StreamTrackedReference {
 public:
  /** @brief Takes ownership of `self`; null owns nothing. */
  explicit DLManagedMemoryBuffer(DLManagedTensor* self);
  /** @brief Runs the producer's deleter once it is safe (now or deferred). */
  ~DLManagedMemoryBuffer() override;
  DLManagedMemoryBuffer(const DLManagedMemoryBuffer&) = delete;
  DLManagedMemoryBuffer& operator=(const DLManagedMemoryBuffer&) = delete;
  DLManagedMemoryBuffer(DLManagedMemoryBuffer&&) = delete;
  DLManagedMemoryBuffer& operator=(DLManagedMemoryBuffer&&) = delete;

  /** @brief The owned managed tensor (null when none); valid while this object lives. */
  DLManagedTensor* managed_tensor() const noexcept { return self_; }

 private:
  friend struct detail::ImportOwnerAccess;
  DLManagedTensor* self_ = nullptr;
};

}  // namespace holoscan
