#pragma once
// A read-only DLPack export of any Tensor, for wrappers that only read (Python's read-only
// wrapper of a writable Tensor): it takes no mutable export lease, so it never blocks the
// Tensor's own exports or writes.
#include <dlpack/dlpack.h>

#include "holoscan/expected.hpp"
#include "holoscan/tensor.hpp"
#include "wing_api.hpp"

namespace holoscan::detail {

/**
 * @brief As Tensor::to_dlpack_versioned(), with READ_ONLY set whatever the Tensor's authority and
 *        without the exclusive claim a writable Tensor's export takes. Never throws.
 */
HOLOSCAN_DLPACK_WING_API expected<DLManagedTensorVersioned*, Error> export_read_only(
    const Tensor& tensor) noexcept;

}  // namespace holoscan::detail
