#pragma once
// Fills a DLManagedTensorContext's view from DLPack metadata (imports, make_tensor and the pool).
#include <cstdint>

#include <dlpack/dlpack.h>

#include "dlpack/dlpack_validate.hpp"
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

/**
 * @brief check_dl_tensor() and assign_view() in one pass: the rules are checked while the shape
 *        and element strides are written into the context's vectors, which must have room for
 *        kMaxTensorDims (take_context() gives such contexts).
 *        On a refusal the view is left as it was and the vectors hold whatever was written;
 *        `facts` says which rule broke.
 */
HOLOSCAN_DLPACK_WING_API LayoutFault assign_checked_view(DLManagedTensorContext& context,
                                                         const DLTensor& tensor,
                                                         std::uint64_t flags, DLPackVersion version,
                                                         LayoutFacts& facts) noexcept;

}  // namespace holoscan::detail
