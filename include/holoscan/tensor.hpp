#pragma once
/**
 * @file
 * @brief holoscan::Tensor, a handle to a shared DLManagedTensorContext, and DLPack import/export,
 *        as Holoscan declares them.
 */
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>
#if __cplusplus >= 202002L
#include <span>
#endif

#include <dlpack/dlpack.h>

#include "holoscan/cuda_handles.hpp"
#include "holoscan/cuda_stream_sync.hpp"
#include "holoscan/deferred_release.hpp"
#include "holoscan/dl_managed_memory_buffer.hpp"
#include "holoscan/dlpack_context.hpp"
#include "holoscan/dlpack_utils.hpp"
#include "holoscan/expected.hpp"
#include "holoscan/export.hpp"
#include "holoscan/stream_tracked_reference.hpp"
#include "holoscan/tensor_memory_reference.hpp"

namespace holoscan {

/** @brief The block pool of <holoscan/tensor_pool.hpp>, which Tensor::copy_to can fill. */
class HOLOSCAN_DLPACK_API TensorPool;

/** @brief Most dimensions an imported or pooled tensor may have (NumPy's and CuPy's limit; the
 *         IPC descriptor and the UCX header carry at most 32). */
inline constexpr std::int32_t kMaxTensorDims = 64;

/**
 * @brief A handle to a shared DLManagedTensorContext (DLPack view, owned dims, memory owner).
 *
 * Copies share the context and its access authority. Every live Tensor holds one handle claim on
 * the context's memory reference: construction and copy retain it, destruction and
 * move-assignment release it, and a moved-from Tensor is empty and holds none. A subclass that
 * assigns `dl_ctx_` itself must keep that pairing (construct through the base instead).
 */
class HOLOSCAN_DLPACK_API Tensor {
 public:
  /** @brief An empty tensor: no context, no claim. */
  Tensor() = default;
  /**
   * @brief Wraps `ctx` (shared, not copied) and retains one claim on its memory; null is empty.
   *        Taken by value, as Holoscan 5.0 does: pass an lvalue to share, an rvalue to hand over.
   *        A view flagged DLPACK_FLAG_BITMASK_READ_ONLY makes the context read-only for good,
   *        as 5.0's constructor locks it.
   */
  explicit Tensor(std::shared_ptr<DLManagedTensorContext> ctx) noexcept;
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
  /**
   * @brief data() for writing: kInvalidArgument for an empty tensor or a null data pointer,
   *        kPermissionDenied for read-only authority (every zero-copy import has it) and while
   *        a mutable DLPack export of the tensor is alive ("Tensor data has an active access
   *        claim", as in Holoscan 5.0).
   */
  expected<void*, Error> mutable_data() &;
  /** @brief Refused on a temporary, as in Holoscan 5.0: its authority would end with it. */
  expected<void*, Error> mutable_data() && = delete;
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
   * @brief Stride of each dimension in bytes (Holoscan 5.0's convention): element stride times
   *        itemsize(), for every type. A packed sub-byte tensor (4- or 6-bit elements without
   *        IS_SUBBYTE_TYPE_PADDED) reports whole items too: float4 of shape {2, 8} gives {8, 1}.
   *        dl_tensor().strides (or dlpack_strides_span()) holds the element strides.
   */
  std::vector<std::int64_t> strides() const;
#if __cplusplus >= 202002L
  /** @brief The extents without a copy (C++20 only); empty for an empty or 0-d tensor. */
  std::span<const std::int64_t> shape_span() const noexcept {
    const DLTensor& view = dl_tensor();
    return view.ndim > 0 && view.shape != nullptr
               ? std::span<const std::int64_t>(view.shape, static_cast<std::size_t>(view.ndim))
               : std::span<const std::int64_t>();
  }
  /** @brief DLPack's element strides without a copy (C++20 only); empty when there are none. */
  std::span<const std::int64_t> dlpack_strides_span() const noexcept {
    const DLTensor& view = dl_tensor();
    return view.ndim > 0 && view.strides != nullptr
               ? std::span<const std::int64_t>(view.strides, static_cast<std::size_t>(view.ndim))
               : std::span<const std::int64_t>();
  }
#endif
  /**
   * @brief Whether the elements are compact and row-major: size-1 dims may have any stride and an
   *        empty tensor is contiguous (Holoscan 5.0 checks every stride; docs/holoscan-5.0.md).
   */
  bool is_contiguous() const noexcept;
  /** @brief Number of elements. */
  std::int64_t size() const noexcept;
  /** @brief Number of dimensions. */
  std::int32_t ndim() const noexcept;
  /**
   * @brief Bytes of one element, ceil(bits * lanes / 8). A 64-bit count, as Holoscan 5.0 returns
   *        it: 8-bit bits times 16-bit lanes reach about 2 MB, which 4.x's uint8_t truncated.
   */
  std::size_t itemsize() const noexcept;
  /** @brief Bytes of the elements' payload (size times itemsize, packed for sub-byte types). */
  std::int64_t nbytes() const noexcept;

  /**
   * @brief Exports a new legacy DLPack owner that keeps the memory alive after every Tensor is
   *        gone and holds one handle claim until the consumer calls its deleter (once: a second
   *        call, until a later export reuses the owner, is counted in failed_releases() and
   *        ignored). Never throws. kInvalidArgument for an empty tensor or a padded sub-byte
   *        tensor (the legacy format cannot say how its bytes are read); kNotSupported for
   *        read-only authority (legacy DLPack has no READ_ONLY flag, and Holoscan 5.0 refuses
   *        rather than widen access: use to_dlpack_versioned()) and, as in 5.0, while a mutable
   *        export of the tensor is alive (see to_dlpack_versioned()); kResourceExhausted when
   *        the heap refuses. The export is mutable: it holds the tensor's exclusive claim.
   */
  expected<DLManagedTensor*, Error> to_dlpack() const;
  /**
   * @brief Exports a new DLPack >= 1.0 owner: the context's (producer's) DLPack version, its
   *        flags plus READ_ONLY for read-only authority, its own shape and explicit strides;
   *        its deleter as to_dlpack()'s. Never throws; kInvalidArgument for an empty tensor,
   *        kResourceExhausted when the heap refuses. As in Holoscan 5.0, an export of a writable
   *        tensor is its one mutable export: until that export's deleter runs (after the GPU
   *        passed its points), another export of the context, through any Tensor over it, is
   *        kPermissionDenied ("Tensor has an active mutable DLPack export") and mutable_data()
   *        too. Read-only tensors export any number of times (flag the view READ_ONLY to publish
   *        a written tensor to several readers).
   */
  expected<DLManagedTensorVersioned*, Error> to_dlpack_versioned() const;
  /** @brief The former name of to_dlpack(), which now returns the expected itself. */
  [[deprecated("use to_dlpack()")]] expected<DLManagedTensor*, Error> export_dlpack() const {
    return to_dlpack();
  }
  /** @brief The former name of to_dlpack_versioned(), which now returns the expected itself. */
  [[deprecated("use to_dlpack_versioned()")]] expected<DLManagedTensorVersioned*, Error>
  export_dlpack_versioned() const {
    return to_dlpack_versioned();
  }

  /**
   * @brief An owning, compact, writable copy on the same device: copy_to(device(), stream).
   */
  expected<Tensor, Error> copy(cudaStream_t stream) const;
  /**
   * @brief An owning, compact row-major, writable copy on `device` (kDLCPU, kDLCUDAHost, kDLCUDA
   *        or kDLCUDAManaged), with IS_COPIED set; any strides are gathered.
   *
   * Host memory to kDLCPU is copied by the host, without CUDA (no GPU needed), once the source
   * is ready (synchronize_for_host when it has a readiness contract). Anything else is copied on
   * `stream`, ordered after the source's readiness (synchronize_for_consumer_stream), and the
   * source gets a deallocation point on `stream` (an owner that tracks none makes the call wait
   * for the copy instead). A kDLCUDA copy takes its memory from `stream` with cudaMallocAsync
   * (`stream` must be of that device; a default-stream handle means that device's) and is
   * stream-ordered: it returns at once with the copy's readiness recorded on `stream`. So is a
   * kDLCUDAManaged copy (cudaMallocManaged). A host target (kDLCPU, kDLCUDAHost by
   * cudaMallocHost) is complete on return, as in Holoscan 5.0. The memory is freed once every
   * point recorded on the copy has completed. kInvalidArgument for an empty tensor, an
   * unsupported device (a negative kDLCUDA id too) or a stream of another device; kNotSupported for
   * a non-contiguous packed sub-byte tensor; kNotImplemented for a stream that is capturing a CUDA
   * graph; kFailure (with the cudaError_t in provenance) for a failed CUDA call, and for a source
   * memory reference whose stream hook throws. After a failure nothing is kept: the memory goes
   * once the GPU has passed what was queued.
   */
  expected<Tensor, Error> copy_to(DLDevice device, cudaStream_t stream) const;
  /**
   * @brief copy_to() into a block of `pool` (device or host), allocated stream-ordered on
   *        `stream` for a device pool; kResourceExhausted at once when the pool has no free
   *        block, kInvalidArgument when the tensor does not fit one.
   */
  expected<Tensor, Error> copy_to(TensorPool& pool, cudaStream_t stream) const;
  /**
   * @brief Copies the elements, compact row-major (any strides gathered), to `destination`
   *        (host memory of at least `destination_bytes` >= nbytes()) and returns once they are
   *        there. Host memory is copied by the host without CUDA; device memory on `stream`,
   *        after the source's readiness. kInvalidArgument for an empty tensor, a null or too
   *        small destination. The destination must not overlap the source (it is not checked).
   */
  expected<void, Error> copy_to_host(void* destination, std::size_t destination_bytes,
                                     cudaStream_t stream) const;
  /**
   * @brief copy_to_host() that returns once the copy is queued on `stream` (for device memory):
   *        the caller waits for `stream` before reading `destination`. The source gets a
   *        deallocation point on `stream` (or, with an owner that tracks none, the call waits).
   *        Host memory is copied at once, as by copy_to_host().
   */
  expected<void, Error> copy_to_host_async(void* destination, std::size_t destination_bytes,
                                           cudaStream_t stream) const;

  /**
   * @brief The shared context (null when empty). Keep a Tensor while its memory is in use.
   *        Assigning another context through it bypasses the handle claims (this Tensor's claim
   *        stays on the old memory, its release goes to the new one). A view written by hand is
   *        checked again by an export as an import checks it (layout, byte_offset and its span,
   *        device type, non-null data and the span from it within the address space, known flag
   *        bits): what an import would refuse is not exported.
   */
  std::shared_ptr<DLManagedTensorContext>& dl_ctx() noexcept { return dl_ctx_; }
  /** @brief The shared context (null when empty). */
  const std::shared_ptr<DLManagedTensorContext>& dl_ctx() const noexcept { return dl_ctx_; }

  /** @brief DLPACK_FLAG_BITMASK_* bits of the producer (0 for a legacy import). */
  std::uint64_t flags() const noexcept;
  /**
   * @brief Whether this tensor has read-only authority: every zero-copy import has, and so has a
   *        context whose view was seen flagged READ_ONLY (at construction or by a later call
   *        here, mutable_data() or an export); clearing the flag later never widens it.
   */
  bool is_read_only() const noexcept;
  /** @brief Deprecated: this library's earlier name; is_read_only() is Holoscan 5.0's. */
  [[deprecated("use is_read_only()")]] bool read_only() const noexcept { return is_read_only(); }
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
  /**
   * @brief Orders `stream` after readiness (one cudaStreamWaitEvent, none on the readiness stream
   *        itself); kNotImplemented when there is no readiness contract, kInvalidArgument when
   *        the tensor is empty.
   */
  expected<void, Error> synchronize_for_consumer_stream(cudaStream_t stream) const;
  /** @brief Deprecated: this library's earlier name; synchronize_for_consumer_stream() is 5.0's. */
  [[deprecated("use synchronize_for_consumer_stream()")]] expected<void, Error>
  synchronize_for_consumer(cudaStream_t stream) const {
    return synchronize_for_consumer_stream(stream);
  }
  /**
   * @brief Blocks until the data is ready; kNotImplemented when there is no readiness contract,
   *        kInvalidArgument when the tensor is empty. Holoscan 5.0 returns success for both;
   *        here a caller can tell a wait from nothing to wait for (docs/holoscan-5.0.md).
   */
  expected<void, Error> synchronize_for_host() const;
  /** @brief Records a stream whose current work must finish before the memory is reused. */
  bool set_deallocation_stream(cudaStream_t stream);

  /**
   * @brief Takes one more handle claim on the memory (retain_tensor_handle), for a holder that is
   *        no Tensor; pair it with exactly one release_handle(). No-op when empty.
   */
  void retain_handle() const noexcept;
  /** @brief Gives back one claim taken by retain_handle(). No-op when empty. */
  void release_handle() const noexcept;

 protected:
  /** @brief The shared context; every Tensor over it holds one claim on its memory reference. */
  std::shared_ptr<DLManagedTensorContext> dl_ctx_;

 private:
  TensorMemoryReference* memory() const noexcept {
    return dl_ctx_ != nullptr ? dl_ctx_->memory_reference.get() : nullptr;
  }
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
 * naming the field; out of host memory is kResourceExhausted, under the same rule. A pointer has
 * one consumer: this library's own export, imported once already or let go of already (its
 * deleter ran), is refused (kInvalidArgument).
 */
HOLOSCAN_DLPACK_API expected<Tensor, Error> make_tensor_from_dlpack_versioned(
    DLManagedTensorVersioned* dl_managed_tensor_ver_ptr);

/**
 * @brief Imports a legacy DLPack tensor, treated as a current-version tensor with no flags, with
 *        read-only authority; validation and the ownership rule as for the versioned import.
 */
HOLOSCAN_DLPACK_API expected<Tensor, Error> make_tensor_from_dlpack(
    DLManagedTensor* dl_managed_tensor_ptr);

}  // namespace holoscan

#include "holoscan/make_tensor.hpp"  // Holoscan code reaches make_tensor from here
