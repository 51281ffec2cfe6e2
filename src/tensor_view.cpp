#include "tensor_view.hpp"

namespace holoscan::detail {

void assign_view(DLManagedTensorContext& context, const DLTensor& tensor, std::uint64_t flags,
                 DLPackVersion version) {
  copy_dl_tensor_with_owned_metadata(
      tensor, context.tensor.dl_tensor, context.dl_shape, context.dl_strides,
      DLPackMetadataCopyOptions{/*materialize_implicit_strides=*/true});
  context.tensor.version = version;
  context.tensor.flags = flags;
  context.tensor.manager_ctx = nullptr;
  context.tensor.deleter = nullptr;
}

}  // namespace holoscan::detail
