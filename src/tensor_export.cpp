#include <array>
#include <memory>
#include <new>

#include "holoscan/tensor.hpp"

namespace holoscan {
namespace {

// One allocation per export: the managed tensor, its own shape/strides, and a strong reference
// to the Tensor's context (which keeps the memory alive) plus one handle claim on the memory.
template <class Managed>
struct ExportedTensor {
  Managed managed{};
  std::shared_ptr<detail::TensorContext> context;
  std::array<std::int64_t, 2 * detail::TensorContext::kInlineDims> inline_dims{};
  std::unique_ptr<std::int64_t[]> heap_dims;

  static void delete_export(Managed* self) noexcept {
    auto* owner = static_cast<ExportedTensor*>(self->manager_ctx);
    owner->context->memory->release_tensor_handle();
    delete owner;
  }
};

template <class Managed>
expected<Managed*, Error> export_context(const std::shared_ptr<detail::TensorContext>& context,
                                         const char* who) {
  if (context == nullptr) {
    return make_unexpected(ErrorCode::kInvalidArgument, std::string(who) + ": the Tensor is empty");
  }
  auto owner =
      std::unique_ptr<ExportedTensor<Managed>>(new (std::nothrow) ExportedTensor<Managed>());
  if (owner == nullptr) {
    return make_unexpected(ErrorCode::kResourceExhausted,
                           std::string(who) + ": out of host memory");
  }
  const DLTensor& source = context->dl;
  std::int64_t* dims = owner->inline_dims.data();
  if (source.ndim > detail::TensorContext::kInlineDims) {
    owner->heap_dims.reset(new (std::nothrow)
                               std::int64_t[2 * static_cast<std::size_t>(source.ndim)]);
    if (owner->heap_dims == nullptr) {
      return make_unexpected(ErrorCode::kResourceExhausted,
                             std::string(who) + ": out of host memory");
    }
    dims = owner->heap_dims.get();
  }
  DLTensor& target = owner->managed.dl_tensor;
  target = source;
  target.shape = source.ndim > 0 ? dims : nullptr;
  target.strides = source.ndim > 0 ? dims + source.ndim : nullptr;
  for (std::int32_t i = 0; i < source.ndim; ++i) {
    target.shape[i] = source.shape[i];
    target.strides[i] = source.strides[i];
  }
  owner->context = context;
  owner->managed.manager_ctx = owner.get();
  owner->managed.deleter = &ExportedTensor<Managed>::delete_export;
  context->memory->retain_tensor_handle();
  return &owner.release()->managed;
}

}  // namespace

expected<DLManagedTensorVersioned*, Error> Tensor::to_dlpack_versioned() const {
  auto managed = export_context<DLManagedTensorVersioned>(context_, "Tensor::to_dlpack_versioned");
  if (managed) {
    (*managed)->version = DLPackVersion{DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
    (*managed)->flags = context_->flags;
  }
  return managed;
}

expected<DLManagedTensor*, Error> Tensor::to_dlpack() const {
  return export_context<DLManagedTensor>(context_, "Tensor::to_dlpack");
}

}  // namespace holoscan
