#pragma once
// Owning copies for `__dlpack__(copy=True)` and for exports to another device.
#include <dlpack/dlpack.h>

#include <holoscan/tensor.hpp>

namespace holoscan::python {

/**
 * @brief Whether `copy_to_host` can copy `tensor` to `target`: host-readable memory (kDLCPU,
 *        kDLCUDAHost) to (kDLCPU, 0). Copies that involve device memory need the C++ library's
 *        Tensor::copy_to, which this build does not have yet.
 */
bool host_copy_supported(const Tensor& tensor, DLDevice target) noexcept;

/**
 * @brief A compact, writable, owning copy of `tensor`'s elements in new host memory (flags
 *        IS_COPIED, plus IS_SUBBYTE_TYPE_PADDED when the source has it): a versioned managed
 *        tensor whose deleter frees it on any thread. The caller waited for the data (host).
 *        BufferError for packed sub-byte elements that are not contiguous.
 */
DLManagedTensorVersioned* copy_to_host_versioned(const Tensor& tensor);

/** @brief As above, in the legacy layout; BufferError when a flag would be lost (padded). */
DLManagedTensor* copy_to_host_legacy(const Tensor& tensor);

}  // namespace holoscan::python
