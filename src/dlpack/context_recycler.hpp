#pragma once
// Imported contexts come from a free list and go back to it, keeping the room of their shape and
// stride vectors, so that an import allocates nothing once warm.
#include <memory>

#include "holoscan/dlpack.hpp"

namespace holoscan::detail {

/**
 * @brief An empty, writable context from the free list (or new), owned by a shared_ptr whose
 *        control block is recycled too, and whose deleter drops the memory reference, empties
 *        the context and gives it back. Throws std::bad_alloc when the heap refuses.
 */
std::shared_ptr<DLManagedTensorContext> make_recycled_context();

}  // namespace holoscan::detail
