#include <array>
#include <memory>
#include <new>
#include <string>
#include <type_traits>

#include "dlpack/context_access.hpp"
#include "dlpack/dlpack_validate.hpp"
#include "dlpack/recycler.hpp"
#include "holoscan/tensor.hpp"

namespace holoscan {
namespace {

constexpr std::int32_t kInlineDims = 6;

// One allocation per export (for ndim <= kInlineDims): the managed tensor, its own shape and
// explicit strides, a strong reference to the context (which keeps the memory alive) and one
// handle claim on the memory, dropped by the deleter.
template <class Managed>
struct ExportedTensor {
  Managed managed;  // every field is written before it is handed out
  std::shared_ptr<DLManagedTensorContext> context;
  std::array<std::int64_t, 2 * kInlineDims> inline_dims;  // written before it is read
  std::unique_ptr<std::int64_t[]> heap_dims;

  // The owner's memory is recycled: once warm an export and its deleter allocate nothing and
  // take no lock (recycler.hpp).
  static ExportedTensor* make() noexcept {
    void* memory = recycler::take();
    return memory != nullptr ? new (memory) ExportedTensor : nullptr;  // no zeroing
  }
  static void destroy(ExportedTensor* owner) noexcept {
    owner->~ExportedTensor();
    recycler::give(owner);
  }
  // Named once the type is complete (in the member functions' bodies).
  struct recycler {
    static void* take() noexcept {
      return detail::BlockRecycler<sizeof(ExportedTensor), alignof(ExportedTensor)>::take();
    }
    static void give(void* block) noexcept {
      detail::BlockRecycler<sizeof(ExportedTensor), alignof(ExportedTensor)>::give(block);
    }
  };
  /** @brief Deleter of the unique_ptr that holds an owner until it is handed out. */
  struct Destroy {
    void operator()(ExportedTensor* owner) const noexcept { destroy(owner); }
  };

  static void delete_export(Managed* self) noexcept {
    auto* owner = static_cast<ExportedTensor*>(self->manager_ctx);
    if (owner->context->memory_reference != nullptr) {
      owner->context->memory_reference->release_tensor_handle();
    }
    destroy(owner);
  }

  // Room for `ndim` extents and as many strides; false when the heap refuses.
  std::int64_t* dims(std::int32_t ndim) noexcept {
    if (ndim <= kInlineDims) {
      return inline_dims.data();
    }
    heap_dims.reset(new (std::nothrow) std::int64_t[2 * static_cast<std::size_t>(ndim)]);
    return heap_dims.get();
  }
};

// Copies the shape and strides of a view the library checked (import, pool, make_tensor) into
// `dims` and says whether it is still the view it checked: its own vectors of ndim values each
// (tested before any is read), the same header and the same values (their fingerprint, summed
// while copying). False: `dims` holds nothing of use.
bool copy_checked_view(const DLManagedTensorContext& context, std::int64_t* dims) noexcept {
  const DLTensor& view = context.tensor.dl_tensor;
  const auto ndim = static_cast<std::size_t>(view.ndim);
  if (view.ndim <= 0 || view.ndim > kMaxTensorDims || view.shape != context.dl_shape.data() ||
      view.strides != context.dl_strides.data() || context.dl_shape.size() != ndim ||
      context.dl_strides.size() != ndim) {
    return view.ndim == 0 && detail::ContextAccess::stamp_matches(context, 0);
  }
  std::uint64_t values = 0;
  for (std::int32_t i = 0; i < view.ndim; ++i) {
    dims[i] = view.shape[i];
    dims[view.ndim + i] = view.strides[i];
    values = detail::add_to_fingerprint(values, i, dims[i], dims[view.ndim + i]);
  }
  return detail::ContextAccess::stamp_matches(context, values);
}

template <class Managed>
expected<Managed*, Error> export_context(const std::shared_ptr<DLManagedTensorContext>& context,
                                         std::uint64_t flags, const char* who) {
  if (context == nullptr) {
    return make_unexpected(ErrorCode::kInvalidArgument, std::string(who) + ": the Tensor is empty");
  }
  const DLTensor& source = context->tensor.dl_tensor;
  const std::int32_t ndim = source.ndim;
  detail::LayoutFacts facts;
  const auto refused = [&] {
    return make_unexpected(
        detail::layout_error(facts, ndim, source.shape, source.strides, source.dtype, who));
  };
  if (ndim < 0 || ndim > kMaxTensorDims) {
    (void)detail::check_layout(ndim, source.shape, source.strides, source.dtype, flags,
                               detail::build_last_dtype_code(), facts);
    return refused();
  }
  std::unique_ptr<ExportedTensor<Managed>, typename ExportedTensor<Managed>::Destroy> owner(
      ExportedTensor<Managed>::make());
  std::int64_t* dims = owner != nullptr ? owner->dims(ndim) : nullptr;
  if (dims == nullptr) {
    return make_unexpected(ErrorCode::kResourceExhausted,
                           std::string(who) + ": out of host memory");
  }
  // Strides are always written out: DLPack >= 1.2 requires them, and older readers accept them.
  if (!copy_checked_view(*context, dims)) {
    // Not a view the library checked, or one whose values were written in place since (its
    // vectors are public): checked like an import while its shape and strides are copied out.
    if (detail::check_layout(ndim, source.shape, source.strides, source.dtype, flags,
                             detail::build_last_dtype_code(), facts, dims,
                             dims + ndim) != detail::LayoutFault::kNone) {
      return refused();
    }
  }
  if constexpr (std::is_same_v<Managed, DLManagedTensorVersioned>) {
    owner->managed.version = context->tensor.version;  // the callers set what they export
    owner->managed.flags = flags;
  }
  DLTensor& target = owner->managed.dl_tensor;
  target = source;
  target.shape = ndim > 0 ? dims : nullptr;
  target.strides = ndim > 0 ? dims + ndim : nullptr;
  owner->context = context;
  owner->managed.manager_ctx = owner.get();
  owner->managed.deleter = &ExportedTensor<Managed>::delete_export;
  if (context->memory_reference != nullptr) {
    context->memory_reference->retain_tensor_handle();
  }
  return &owner.release()->managed;
}

// The producer's version travels with the tensor (as in Holoscan 5.0). A context built by hand
// that never set one (major 0) is stamped with this build's version, which describes its layout.
DLPackVersion exported_version(DLPackVersion context_version) noexcept {
  if (context_version.major != DLPACK_MAJOR_VERSION) {
    return DLPackVersion{DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
  }
  return context_version;
}

}  // namespace

expected<DLManagedTensorVersioned*, Error> Tensor::to_dlpack_versioned() const {
  std::uint64_t flags = this->flags();
  if (is_read_only()) {
    flags |= DLPACK_FLAG_BITMASK_READ_ONLY;
  }
  auto managed =
      export_context<DLManagedTensorVersioned>(dl_ctx_, flags, "Tensor::to_dlpack_versioned");
  if (managed) {
    (*managed)->version = exported_version(dl_ctx_->tensor.version);
    (*managed)->flags = flags;
  }
  return managed;
}

expected<DLManagedTensor*, Error> Tensor::to_dlpack() const {
  if (dl_ctx_ != nullptr && is_read_only()) {
    return make_unexpected(ErrorCode::kNotSupported,
                           "Tensor::to_dlpack: Legacy DLPack cannot represent read-only Tensor "
                           "authority; use to_dlpack_versioned");
  }
  if ((flags() & detail::kSubBytePaddedFlag) != 0 && detail::is_packed_sub_byte(dtype(), 0)) {
    return make_unexpected(ErrorCode::kInvalidArgument,
                           "Tensor::to_dlpack: the tensor's sub-byte elements are padded "
                           "(IS_SUBBYTE_TYPE_PADDED), which a legacy DLManagedTensor cannot say; "
                           "use to_dlpack_versioned");
  }
  return export_context<DLManagedTensor>(dl_ctx_, flags(), "Tensor::to_dlpack");
}

}  // namespace holoscan
