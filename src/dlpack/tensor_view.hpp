#pragma once
// Fills a DLManagedTensorContext's view from validated DLPack metadata (imports and the pool).
#include <cstdint>

#include <dlpack/dlpack.h>

#include "holoscan/dlpack.hpp"
#include "wing_api.hpp"

namespace holoscan::detail {

/**
 * @brief Points `context`'s view at a copy of `tensor`'s metadata with explicit element strides
 *        (compact row-major when `tensor` has none); allocates only when the context's vectors
 *        lack the capacity. The view has no deleter: the memory reference owns the memory.
 */
HOLOSCAN_DLPACK_WING_API void assign_view(DLManagedTensorContext& context, const DLTensor& tensor,
                                          std::uint64_t flags, DLPackVersion version);

}  // namespace holoscan::detail
