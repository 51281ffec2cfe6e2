#include "holoscan/dlpack_context.hpp"

#include "dlpack/context_access.hpp"

namespace holoscan {
namespace {

// Re-points `view` at `shape`/`strides` where `source` pointed at the source context's storage,
// so that a copied context never reads through the original's vectors.
void point_at_own_storage(const DLManagedTensorContext& source, DLManagedTensorContext& copy) {
  DLTensor& view = copy.tensor.dl_tensor;
  if (source.tensor.dl_tensor.shape != nullptr &&
      source.tensor.dl_tensor.shape == source.dl_shape.data()) {
    view.shape = copy.dl_shape.data();
  }
  if (source.tensor.dl_tensor.strides != nullptr &&
      source.tensor.dl_tensor.strides == source.dl_strides.data()) {
    view.strides = copy.dl_strides.data();
  }
}

}  // namespace

DLManagedTensorContext::DLManagedTensorContext(const DLManagedTensorContext& other)
    : tensor(other.tensor),
      memory_reference(other.memory_reference),
      dl_shape(other.dl_shape),
      dl_strides(other.dl_strides),
      read_only_(other.read_only_.load(std::memory_order_acquire)),
      validated_stamp_(other.validated_stamp_) {
  point_at_own_storage(other, *this);
}

DLManagedTensorContext& DLManagedTensorContext::operator=(const DLManagedTensorContext& other) {
  if (this != &other) {
    tensor = other.tensor;
    memory_reference = other.memory_reference;
    dl_shape = other.dl_shape;
    dl_strides = other.dl_strides;
    read_only_.store(other.read_only_.load(std::memory_order_acquire), std::memory_order_release);
    validated_stamp_ = other.validated_stamp_;
    point_at_own_storage(other, *this);
  }
  return *this;
}

namespace detail {

namespace {

// What a validated view is recognised by: ndim, dtype and flags in one word, never 0.
std::uint64_t stamp_of(const DLManagedTensorVersioned& view) noexcept {
  const DLTensor& t = view.dl_tensor;
  const auto ndim = static_cast<std::uint64_t>(static_cast<std::uint32_t>(t.ndim) & 0xffu);
  return std::uint64_t{1} << 63 | ndim << 48 | (view.flags & 0xffffu) << 32 |
         std::uint64_t{t.dtype.code} << 24 | std::uint64_t{t.dtype.bits} << 16 | t.dtype.lanes;
}

}  // namespace

void ContextAccess::mark_validated(DLManagedTensorContext& context) noexcept {
  context.validated_stamp_ = stamp_of(context.tensor);
}

void ContextAccess::forget_validated(DLManagedTensorContext& context) noexcept {
  context.validated_stamp_ = 0;
}

bool ContextAccess::validated(const DLManagedTensorContext& context) noexcept {
  const DLTensor& view = context.tensor.dl_tensor;
  const auto ndim = static_cast<std::size_t>(view.ndim);
  return context.validated_stamp_ == stamp_of(context.tensor) && view.ndim >= 0 &&
         context.dl_shape.size() == ndim && context.dl_strides.size() == ndim &&
         (ndim == 0 ||
          (view.shape == context.dl_shape.data() && view.strides == context.dl_strides.data()));
}

}  // namespace detail
}  // namespace holoscan
