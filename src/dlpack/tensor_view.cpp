#include "dlpack/tensor_view.hpp"

namespace holoscan::detail {

void assign_view(DLManagedTensorContext& context, const DLTensor& tensor, std::uint64_t flags,
                 DLPackVersion version) {
  copy_dl_tensor_with_owned_metadata(
      context, tensor, DLPackMetadataCopyOptions{/*materialize_implicit_strides=*/true});
  context.tensor.version = version;
  context.tensor.flags = flags;
}

}  // namespace holoscan::detail
