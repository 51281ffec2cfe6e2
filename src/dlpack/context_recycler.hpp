#pragma once
// Imported contexts come from a free list and go back to it, keeping the room of their shape and
// stride vectors, so that an import allocates nothing once warm (see recycler.hpp).
#include <memory>

#include "holoscan/dlpack.hpp"
#include "wing_api.hpp"

namespace holoscan::detail {

/**
 * @brief An empty, writable context with room for kMaxTensorDims in both vectors (a kept one,
 *        or new), owned by nobody yet; null when the heap refuses.
 */
HOLOSCAN_DLPACK_WING_API DLManagedTensorContext* take_context() noexcept;

/** @brief Drops the memory reference, empties `context` and keeps it for reuse (or frees it). */
HOLOSCAN_DLPACK_WING_API void give_context(DLManagedTensorContext* context) noexcept;

/**
 * @brief Owns `context` (from take_context()) with a shared_ptr whose control block is recycled
 *        too and whose deleter gives the context back. Throws std::bad_alloc when the heap
 *        refuses, after giving the context back.
 */
HOLOSCAN_DLPACK_WING_API std::shared_ptr<DLManagedTensorContext> share_recycled(
    DLManagedTensorContext* context);

}  // namespace holoscan::detail
