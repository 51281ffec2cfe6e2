#pragma once
/**
 * @file
 * @brief holoscan::Tensor, a handle to a shared DLManagedTensorContext, and DLPack import/export,
 *        as Holoscan declares them.
 */
#include <cstdint>
#include <memory>
#include <vector>

#include <dlpack/dlpack.h>

#include "holoscan/cuda_handles.hpp"
#include "holoscan/cuda_stream_sync.hpp"
#include "holoscan/dlpack.hpp"
#include "holoscan/expected.hpp"
#include "holoscan/tensor_memory_reference.hpp"

namespace holoscan {

/** @brief Most dimensions an imported or pooled tensor may have. */
inline constexpr std::int32_t kMaxTensorDims = 32;

/**
 * @brief A handle to a shared DLManagedTensorContext (DLPack view, owned dims, memory owner).
 *
 * Copies share the context and its access authority. Every live Tensor holds one handle claim on
 * the context's memory reference: construction and copy retain it, destruction and
 * move-assignment release it, and a moved-from Tensor is empty and holds none. A subclass that
 * assigns `dl_ctx_` itself must keep that pairing (construct through the base instead).
 */
class Tensor {
 public:
  /** @brief An empty tensor: no context, no claim. */
  Tensor() = default;
  /** @brief Wraps `ctx` (shared, not copied) and retains one claim on its memory; null is empty. */
  explicit Tensor(std::shared_ptr<DLManagedTensorContext>& ctx) noexcept;
  /** @brief As above, taking the caller's pointer. */
  explicit Tensor(std::shared_ptr<DLManagedTensorContext>&& ctx) noexcept;
  /**
   * @brief Imports a legacy DLPack tensor as make_tensor_from_dlpack does; throws RuntimeError
   *        (with that Error's code) on a rejection, which leaves ownership with the caller.
   */
  explicit Tensor(DLManagedTensor* dl_managed_tensor_ptr);
  /** @brief Imports a DLPack >= 1.0 tensor as make_tensor_from_dlpack_versioned does; throws
   *         RuntimeError on a rejection, which leaves ownership with the caller. */
  explicit Tensor(DLManagedTensorVersioned* dl_managed_tensor_ver_ptr);
  /** @brief Shares the context and retains one more claim. */
  Tensor(const Tensor& other) noexcept;
  /** @brief Takes the context and its claim; `other` becomes empty. */
  Tensor(Tensor&& other) noexcept = default;
  /** @brief Shares `other`'s context: retains the new claim, then releases the old. */
  Tensor& operator=(const Tensor& other) noexcept;
  /** @brief Releases the held claim and takes `other`'s context and claim. */
  Tensor& operator=(Tensor&& other) noexcept;
  /** @brief Releases the held claim. */
  virtual ~Tensor();

  /** @brief Whether this handle refers to a context. */
  explicit operator bool() const noexcept { return dl_ctx_ != nullptr; }

  /** @brief Address of the first element (DLPack data plus byte_offset); null when empty. */
  void* data() const noexcept;
  /** @brief data() as a pointer to const T (read-only authority is the norm for imports). */
  template <class T>
  const T* data_as() const noexcept {
    return static_cast<const T*>(data());
  }
  /** @brief Where the memory lives. */
  DLDevice device() const noexcept;
  /** @brief Element type. */
  DLDataType dtype() const noexcept;
  /** @brief Extent of each dimension. */
  std::vector<std::int64_t> shape() const;
  /**
   * @brief Stride of each dimension in bytes (Holoscan's convention): element stride times
   *        itemsize(). For packed sub-byte types (4- or 6-bit elements without
   *        IS_SUBBYTE_TYPE_PADDED) a step of a fraction of a byte is rounded up to a whole byte,
   *        sign kept: a float4 tensor of shape {2, 8} reports {4, 1}. dl_tensor().strides holds
   *        the exact element strides.
   */
  std::vector<std::int64_t> strides() const;
  /** @brief Whether the elements are compact and row-major (size-1 dims may have any stride). */
  bool is_contiguous() const noexcept;
  /** @brief Number of elements. */
  std::int64_t size() const noexcept;
  /** @brief Number of dimensions. */
  std::int32_t ndim() const noexcept;
  /** @brief Bytes of one element, ceil(bits * lanes / 8); imports reject items over 255 bytes. */
  std::uint8_t itemsize() const noexcept;
  /** @brief Bytes of the elements' payload (size times itemsize, packed for sub-byte types). */
  std::int64_t nbytes() const noexcept;

  /**
   * @brief Exports a new legacy DLPack owner that keeps the memory alive after every Tensor is
   *        gone; the consumer calls its deleter once. Legacy tensors carry no flags, so
   *        READ_ONLY is dropped (as in Holoscan). Throws RuntimeError when export_dlpack fails.
   */
  DLManagedTensor* to_dlpack() const;
  /**
   * @brief Exports a new DLPack >= 1.0 owner: this build's version, the context's flags plus
   *        READ_ONLY for read-only authority, its own shape and explicit strides. Throws
   *        RuntimeError when export_dlpack_versioned fails.
   */
  DLManagedTensorVersioned* to_dlpack_versioned() const;
  /**
   * @brief to_dlpack() that reports failure as an Error: kInvalidArgument for an empty tensor
   *        or a padded sub-byte tensor (the legacy format cannot say how its bytes are read),
   *        kResourceExhausted when the heap refuses.
   */
  expected<DLManagedTensor*, Error> export_dlpack() const;
  /** @brief to_dlpack_versioned() that reports failure as an Error. */
  expected<DLManagedTensorVersioned*, Error> export_dlpack_versioned() const;

  /** @brief The shared context (null when empty). Keep a Tensor while its memory is in use. */
  std::shared_ptr<DLManagedTensorContext>& dl_ctx() noexcept { return dl_ctx_; }
  /** @brief The shared context (null when empty). */
  const std::shared_ptr<DLManagedTensorContext>& dl_ctx() const noexcept { return dl_ctx_; }

  /** @brief DLPACK_FLAG_BITMASK_* bits of the producer (0 for a legacy import). */
  std::uint64_t flags() const noexcept;
  /** @brief Whether this tensor has read-only authority (every zero-copy import has). */
  bool read_only() const noexcept;
  /** @brief Whether the producer marked the data as a copy. */
  bool is_copied() const noexcept;
  /** @brief DLPack version of the context's view. */
  DLPackVersion version() const noexcept;
  /** @brief The DLTensor view (strides in elements); valid while the context lives. */
  const DLTensor& dl_tensor() const noexcept;
  /**
   * @brief The owner of the memory, which it keeps alive; null when empty. It holds no handle
   *        claim (as in Holoscan), but a pool does not reuse memory whose owner is still held.
   */
  std::shared_ptr<TensorMemoryReference> memory_reference() const noexcept;

  /** @brief Records the producer stream whose current work makes the data ready. */
  bool set_readiness_stream(cudaStream_t stream);
  /** @brief Whether readiness can be ordered against consumers. */
  bool has_readiness_stream_contract() const noexcept;
  /** @brief The producer stream recorded, or null (also for cross-process imports). */
  cudaStream_t readiness_stream() const noexcept;
  /** @brief Orders `stream` after readiness; kNotImplemented when there is no readiness contract.
   */
  expected<void, Error> synchronize_for_consumer(cudaStream_t stream);
  /** @brief Blocks until the data is ready; kNotImplemented when there is no readiness contract. */
  expected<void, Error> synchronize_for_host();
  /** @brief Records a stream whose current work must finish before the memory is reused. */
  bool set_deallocation_stream(cudaStream_t stream);

 protected:
  /** @brief The shared context; every Tensor over it holds one claim on its memory reference. */
  std::shared_ptr<DLManagedTensorContext> dl_ctx_;

 private:
  TensorMemoryReference* memory() const noexcept {
    return dl_ctx_ != nullptr ? dl_ctx_->memory_reference.get() : nullptr;
  }
  void retain_claim() noexcept;
  void release_claim() noexcept;
};

/**
 * @brief Imports a DLPack >= 1.0 tensor, keeping its version and flags, with read-only authority.
 *
 * The producer handle is validated first (null, major version, flags, ndim, shape, dtype, device,
 * data, strides, byte_offset and the addressed span, all sizes in int64). On success the Tensor
 * owns the producer's deleter, which runs once the last owner is gone and the GPU has passed
 * every recorded point. **A rejection leaves ownership with the caller** (Holoscan 5.0's rule,
 * unlike the DLPack header's advice): the library runs no deleter, reads nothing after the failed
 * field and keeps nothing; the caller may call the deleter. Rejections are kInvalidArgument
 * naming the field; out of host memory is kResourceExhausted, under the same rule.
 */
expected<Tensor, Error> make_tensor_from_dlpack_versioned(
    DLManagedTensorVersioned* dl_managed_tensor_ver_ptr);

/**
 * @brief Imports a legacy DLPack tensor, treated as a current-version tensor with no flags, with
 *        read-only authority; validation and the ownership rule as for the versioned import.
 */
expected<Tensor, Error> make_tensor_from_dlpack(DLManagedTensor* dl_managed_tensor_ptr);

}  // namespace holoscan
