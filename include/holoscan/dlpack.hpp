#pragma once
/**
 * @file
 * @brief DLManagedTensorContext and the owners of imported DLPack tensors (DLPack >= 1.0 and
 *        legacy), as Holoscan 5.0 declares them in <holoscan/dlpack.hpp>.
 */
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include <dlpack/dlpack.h>

#include "holoscan/cuda_handles.hpp"
#include "holoscan/deferred_release.hpp"
#include "holoscan/detail/abi.hpp"
#include "holoscan/dlpack_utils.hpp"
#include "holoscan/expected.hpp"
#include "holoscan/stream_tracked_reference.hpp"
#include "holoscan/tensor_memory_reference.hpp"

#if !defined(DLPACK_MAJOR_VERSION) || DLPACK_MAJOR_VERSION < 1
#error "holoscan-dlpack needs DLPack >= 1.0 headers (DLManagedTensorVersioned)"
#endif

namespace holoscan {

struct HOLOSCAN_DLPACK_ABI DLManagedTensorContext;

namespace detail {

/** @brief Read and narrow the access authority that a context keeps privately. */
struct HOLOSCAN_DLPACK_ABI ContextAccess {
  /** @brief Whether the context's memory may only be read through it. */
  static bool read_only(const DLManagedTensorContext& context) noexcept;
  /** @brief Narrows the context to read-only authority (imports); never widened again. */
  static void narrow_to_read_only(DLManagedTensorContext& context) noexcept;
  /** @brief Gives a context that a pool hands out anew its writer authority back. */
  static void restore_writable(DLManagedTensorContext& context) noexcept;
  /**
   * @brief Records that the view (its ndim, dtype and flags, over the context's own shape and
   *        strides) met the layout rules; the library does so for the contexts it builds.
   */
  static void mark_validated(DLManagedTensorContext& context) noexcept;
  /** @brief Forgets mark_validated(), for a context whose view is about to change. */
  static void forget_validated(DLManagedTensorContext& context) noexcept;
  /**
   * @brief Whether the view is still the one marked: same ndim, dtype and flags, pointing at the
   *        context's own shape and strides of ndim entries. A view built or replaced by hand is
   *        not (its metadata is checked again before it is copied out).
   */
  static bool validated(const DLManagedTensorContext& context) noexcept;
};

}  // namespace detail

/**
 * @brief What a Tensor wraps: the versioned DLPack view, its owned shape and strides, and the
 *        owner of the memory. Every Tensor copied from one another shares one context.
 *
 * The memory stays alive as long as the context (through `memory_reference`). `tensor.dl_tensor`
 * points its shape and strides at `dl_shape` and `dl_strides` (strides in elements). A context
 * starts with private, writable access authority; imports narrow it to read-only for good, and
 * every Tensor over the context sees the same authority. Copying a context re-points the copy's
 * shape and strides at its own vectors.
 */
struct HOLOSCAN_DLPACK_ABI DLManagedTensorContext {
  /** @brief An empty context with writable authority. */
  DLManagedTensorContext() noexcept = default;
  /** @brief Copies everything; the copy's DLTensor points at the copy's own vectors. */
  DLManagedTensorContext(const DLManagedTensorContext& other);
  /** @brief Copies everything; this DLTensor then points at this context's own vectors. */
  DLManagedTensorContext& operator=(const DLManagedTensorContext& other);
  /** @brief Destroys the view; the memory goes when its last owner does. */
  ~DLManagedTensorContext() = default;

  DLManagedTensorVersioned tensor{};  ///< The view: version, flags and DLTensor (no deleter).
  std::shared_ptr<TensorMemoryReference> memory_reference;  ///< Keeps the memory alive.
  std::vector<std::int64_t> dl_shape;                       ///< Storage of the shape.
  std::vector<std::int64_t> dl_strides;                     ///< Storage of the strides, elements.

 private:
  friend struct detail::ContextAccess;
  std::atomic<bool> read_only_{false};  // authority shared by every Tensor over this context
  std::uint64_t validated_stamp_ = 0;   // see ContextAccess::mark_validated; 0: not validated
};

/**
 * @brief Wraps the deleter of a DLManagedTensorVersioned (DLPack >= 1.0).
 *
 * Takes ownership of `self`: the producer's deleter runs exactly once, after every recorded
 * deallocation point (and the readiness point) has completed on the GPU; the destructor never
 * blocks on the GPU (a pending release runs on the library's release thread, see
 * flush_deferred_releases()).
 */
class HOLOSCAN_DLPACK_ABI DLManagedMemoryBufferVersioned : public StreamTrackedReference {
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
  DLManagedTensorVersioned* self_ = nullptr;
};

/**
 * @brief Wraps the deleter of a legacy DLManagedTensor (pre-1.0 layout, no version or flags).
 *
 * Same hooks and the same release guarantees as DLManagedMemoryBufferVersioned.
 */
class HOLOSCAN_DLPACK_ABI DLManagedMemoryBuffer : public StreamTrackedReference {
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
  DLManagedTensor* self_ = nullptr;
};

}  // namespace holoscan

#include "holoscan/tensor.hpp"  // Holoscan code reaches Tensor and the import functions from here
