#include "dlpack/tensor_view.hpp"

#include "dlpack/context_access.hpp"
#include "holoscan/tensor.hpp"

namespace holoscan::detail {

void assign_view(DLManagedTensorContext& context, const DLTensor& tensor, std::uint64_t flags,
                 DLPackVersion version) {
  copy_dl_tensor_with_owned_metadata(
      context, tensor, DLPackMetadataCopyOptions{/*materialize_implicit_strides=*/true});
  context.tensor.version = version;
  context.tensor.flags = flags;
}

LayoutFault assign_checked_view(DLManagedTensorContext& context, const DLTensor& tensor,
                                std::uint64_t flags, DLPackVersion version,
                                LayoutFacts& facts) noexcept {
  const std::int32_t ndim = tensor.ndim;
  if (ndim < 0 || ndim > kMaxTensorDims) {
    return check_dl_tensor(tensor, flags, facts);  // refused before anything is written
  }
  const auto rank = static_cast<std::size_t>(ndim);
  // Within the room the caller guarantees: no allocation, nothing thrown. A recycled context
  // usually has the size already (the same shapes come again).
  if (context.dl_shape.size() != rank) {
    context.dl_shape.resize(rank);
  }
  if (context.dl_strides.size() != rank) {
    context.dl_strides.resize(rank);
  }
  std::int64_t* shape = context.dl_shape.data();
  std::int64_t* strides = context.dl_strides.data();
  if (const LayoutFault fault = check_dl_tensor(tensor, flags, facts, shape, strides);
      fault != LayoutFault::kNone) {
    return fault;
  }
  DLManagedTensorVersioned& view = context.tensor;
  view.version = version;
  view.manager_ctx = nullptr;
  view.deleter = nullptr;
  view.flags = flags;
  DLTensor& target = view.dl_tensor;
  target.data = tensor.data;
  target.device = tensor.device;
  target.ndim = ndim;
  target.dtype = tensor.dtype;
  target.shape = ndim > 0 ? shape : nullptr;
  target.strides = ndim > 0 ? strides : nullptr;
  target.byte_offset = tensor.byte_offset;
  ContextAccess::mark_checked(context);  // checked while the values were written
  return LayoutFault::kNone;
}

}  // namespace holoscan::detail
