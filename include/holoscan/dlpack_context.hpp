#pragma once
/**
 * @file
 * @brief DLManagedTensorContext: what a Tensor wraps, as Holoscan 5.0 declares it.
 */
#include <atomic>
#include <cstdint>
#include <memory>
#include <typeinfo>
#include <vector>

#include <dlpack/dlpack.h>

#include "holoscan/export.hpp"
#include "holoscan/tensor_memory_reference.hpp"

#if !defined(DLPACK_MAJOR_VERSION) || DLPACK_MAJOR_VERSION < 1
#error "holoscan-dlpack needs DLPack >= 1.0 headers (DLManagedTensorVersioned)"
#endif

namespace holoscan {

namespace detail {
struct HOLOSCAN_DLPACK_ABI ContextAccess;
}  // namespace detail

/**
 * @brief What a Tensor wraps: the versioned DLPack view, its owned shape and strides, and the
 *        owner of the memory. Every Tensor copied from one another shares one context.
 *
 * The memory stays alive as long as the context (through `memory_reference`). `tensor.dl_tensor`
 * points its shape and strides at `dl_shape` and `dl_strides` (strides in elements). A context
 * starts with private, writable access authority; imports narrow it to read-only for good, as
 * does a READ_ONLY flag in its view once a Tensor sees it, and every Tensor over the context sees
 * the same authority. Copying a context re-points the copy's
 * shape and strides at its own vectors.
 */
struct HOLOSCAN_DLPACK_API DLManagedTensorContext {
  /**
   * @brief An empty context with writable authority whose view carries the DLPack version the
   *        library was built with (as Holoscan 5.0's constructor writes its own, 1.3).
   */
  DLManagedTensorContext() noexcept;
  /** @brief Copies the view, flags, memory reference and vectors; the copy's DLTensor points at
   *         its own vectors, and it is a context of its own: another context's live mutable
   *         export (an exclusive claim of that context, as in Holoscan 5.0) does not bind it. */
  DLManagedTensorContext(const DLManagedTensorContext& other);
  /** @brief Copies everything but a wider authority (a read-only context stays read-only); this
   *         DLTensor then points at this context's own vectors. */
  DLManagedTensorContext& operator=(const DLManagedTensorContext& other);
  /** @brief Destroys the view; the memory goes when its last owner does. */
  ~DLManagedTensorContext() = default;

  DLManagedTensorVersioned tensor{};  ///< The view: version, flags and DLTensor (no deleter).
  std::shared_ptr<TensorMemoryReference> memory_reference;  ///< Keeps the memory alive.
  std::vector<std::int64_t> dl_shape;                       ///< Storage of the shape.
  std::vector<std::int64_t> dl_strides;                     ///< Storage of the strides, elements.

 private:
  friend struct detail::ContextAccess;
  static constexpr std::int32_t kCheckedDims = 6;
  // A copy of a view the library checked (ContextAccess::mark_checked): the vectors above are
  // public and may be written in place, so an export compares against this copy.
  struct CheckedView {
    std::uint64_t header = 0;  // ndim and dtype; 0: nothing recorded
    std::uint64_t flags = 0;
    std::uintptr_t first = 0;  // data + byte_offset: the span was checked from this address
    std::int64_t dims[2 * kCheckedDims] = {};  // extents, then strides
  };
  std::atomic<bool> read_only_{false};  // authority shared by every Tensor over this context
  // A DLPack export of this context's writable view is alive (Holoscan 5.0's exclusive access
  // claim): another export and mutable_data() are refused until its deleter runs. Never copied.
  std::atomic<bool> mutable_export_{false};
  // The library made this context and nothing but this memory reference keeps its memory while it
  // is the one in memory_reference: an export may then hold the reference alone
  // (ContextAccess::memory_lives_in_reference). A reference put in its place by a holder vouches
  // for nothing (a pool block's memory is then kept by the context itself). Never copied.
  const TensorMemoryReference* memory_lives_in_ = nullptr;
  // That reference's own class when it is an owner the library made which lives by its holds (an
  // import's, a pool block's): an export holds it with one atomic
  // (ContextAccess::memory_held_by_holds). The class is checked too, since a holder may put
  // another object at the same address in place. Never copied.
  const std::type_info* holds_owner_type_ = nullptr;
  CheckedView checked_;
};

}  // namespace holoscan
