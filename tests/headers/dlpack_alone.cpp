// Holoscan code that includes only <holoscan/dlpack.hpp> (or only <holoscan/tensor.hpp>, the
// test's HOLOSCAN_DLPACK_HEADER) gets Tensor, DLManagedTensorContext, the owners and the import
// functions, as it does from Holoscan 5.0's headers (syntax only).
#ifndef HOLOSCAN_DLPACK_HEADER
#define HOLOSCAN_DLPACK_HEADER <holoscan/dlpack.hpp>
#endif
#include HOLOSCAN_DLPACK_HEADER

#include <memory>

holoscan::expected<holoscan::Tensor, holoscan::Error> import_both(
    DLManagedTensorVersioned* versioned, DLManagedTensor* legacy) {
  auto context = std::make_shared<holoscan::DLManagedTensorContext>();
  context->memory_reference = std::make_shared<holoscan::DLManagedMemoryBufferVersioned>(nullptr);
  holoscan::Tensor wrapped(context);
  auto first = holoscan::make_tensor_from_dlpack_versioned(versioned);
  auto second = holoscan::make_tensor_from_dlpack(legacy);
  return first ? first : second ? second : holoscan::expected<holoscan::Tensor>(wrapped);
}
