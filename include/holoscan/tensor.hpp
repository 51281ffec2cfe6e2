#pragma once
/**
 * @file
 * @brief Tensor handles over TensorMemoryReference, and DLPack import/export.
 */
#include <cstdint>
#include <memory>
#include <vector>

#include <dlpack/dlpack.h>

#include "holoscan/cuda_handles.hpp"
#include "holoscan/detail/tensor_context.hpp"
#include "holoscan/expected.hpp"
#include "holoscan/tensor_memory_reference.hpp"

namespace holoscan {

/** @brief Most dimensions an imported tensor may have. */
inline constexpr std::int32_t kMaxTensorDims = 32;

/**
 * @brief A handle to a shared tensor context (DLPack metadata, owned dims, the memory owner).
 *
 * Copies share the context. Every live Tensor holds one handle claim on its memory reference:
 * construction and copy retain, destruction and move-assignment release, and a moved-from
 * Tensor is empty and holds none.
 */
class Tensor {
 public:
  /** @brief An empty tensor: no memory, no claim. */
  Tensor() noexcept = default;
  /**
   * @brief Wraps `context` and retains one claim on its memory (for pools and importers); a
   *        context without memory gives an empty Tensor.
   */
  explicit Tensor(std::shared_ptr<detail::TensorContext> context) noexcept;
  /** @brief Shares the context and retains one more claim. */
  Tensor(const Tensor& other) noexcept;
  /** @brief Takes the context and its claim; `other` becomes empty. */
  Tensor(Tensor&& other) noexcept = default;
  /** @brief Shares `other`'s context: retains the new claim, then releases the old. */
  Tensor& operator=(const Tensor& other) noexcept;
  /** @brief Releases the held claim and takes `other`'s context and claim. */
  Tensor& operator=(Tensor&& other) noexcept;
  /** @brief Releases the held claim. */
  ~Tensor();

  /** @brief Whether this handle refers to a tensor. */
  explicit operator bool() const noexcept { return context_ != nullptr; }

  /** @brief Address of the first element (DLPack data plus byte_offset); null when empty. */
  void* data() const noexcept;
  /** @brief Where the memory lives. */
  DLDevice device() const noexcept;
  /** @brief Element type. */
  DLDataType dtype() const noexcept;
  /** @brief Extent of each dimension. */
  std::vector<std::int64_t> shape() const;
  /** @brief Stride of each dimension in bytes (Holoscan's convention). */
  std::vector<std::int64_t> strides() const;
  /** @brief Number of dimensions. */
  std::int32_t ndim() const noexcept;
  /** @brief Number of elements. */
  std::int64_t size() const noexcept;
  /** @brief Bytes of one element (bits * lanes, rounded up to whole bytes). */
  std::int64_t itemsize() const noexcept;
  /** @brief Bytes of the elements' payload (size times itemsize, packed for sub-byte types). */
  std::int64_t nbytes() const noexcept;
  /** @brief Whether the elements are compact and row-major (size-1 dims may have any stride). */
  bool is_contiguous() const noexcept;
  /** @brief DLPACK_FLAG_BITMASK_* bits kept from the import (0 for a legacy import). */
  std::uint64_t flags() const noexcept;
  /** @brief Whether the producer marked the data read-only. */
  bool read_only() const noexcept;
  /** @brief Whether the producer marked the data as a copy. */
  bool is_copied() const noexcept;
  /** @brief The DLTensor view (strides in elements, never null when ndim > 0); valid while held. */
  const DLTensor& dl_tensor() const noexcept;
  /**
   * @brief The owner of the memory, kept alive by the returned pointer; null when empty.
   *
   * As in Holoscan, the pointer holds no handle claim: only Tensors and exported DLPack owners
   * keep pool memory from being reused, so keep a Tensor while the memory is in use.
   */
  std::shared_ptr<TensorMemoryReference> memory_reference() const noexcept;

  /** @brief Records the producer stream whose current work makes the data ready. */
  bool set_readiness_stream(cudaStream_t stream);
  /** @brief Whether readiness can be ordered against consumers. */
  bool has_readiness_stream_contract() const noexcept;
  /** @brief Orders `stream` after readiness; kNotImplemented when there is no readiness contract.
   */
  expected<void, Error> synchronize_for_consumer(cudaStream_t stream);
  /** @brief Blocks until the data is ready; kNotImplemented when there is no readiness contract. */
  expected<void, Error> synchronize_for_host();
  /** @brief Records a stream whose current work must finish before the memory is reused. */
  bool set_deallocation_stream(cudaStream_t stream);

  /** @brief Exports a new DLPack >= 1.0 owner (flags kept) that outlives every Tensor. */
  expected<DLManagedTensorVersioned*, Error> to_dlpack_versioned() const;
  /** @brief Exports a new legacy DLPack owner (flags cannot be carried) that outlives every Tensor.
   */
  expected<DLManagedTensor*, Error> to_dlpack() const;

 private:
  void release_claim() noexcept;

  std::shared_ptr<detail::TensorContext> context_;
};

/**
 * @brief Imports a DLPack >= 1.0 tensor; ownership passes at the call.
 *
 * Every error path runs the producer's deleter exactly once and names the bad field. A different
 * major version follows the DLPack rule: the deleter runs and nothing else is read.
 */
expected<Tensor, Error> make_tensor_from_dlpack_versioned(DLManagedTensorVersioned* managed);

/** @brief Imports a legacy DLPack tensor (no flags); ownership passes at the call. */
expected<Tensor, Error> make_tensor_from_dlpack(DLManagedTensor* managed);

}  // namespace holoscan
