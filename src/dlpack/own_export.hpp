#pragma once
// This library's own exports, as an import meets them again: one pointer has one consumer
// (DLPack's rule), and an export's owner is recycled at once when its deleter runs, so a second
// import of one pointer would run the deleter of a later export that took the same block.
#include <dlpack/dlpack.h>

namespace holoscan::detail {

/**
 * @brief For an import about to take ownership of `managed`: true, and the export marked taken,
 *        when `managed` is not this library's export or is one no import took yet; false when an
 *        import took it already (the caller's second import of one pointer), which is refused.
 */
bool take_own_export(DLManagedTensorVersioned* managed) noexcept;
/** @brief As above, for a legacy export. */
bool take_own_export(DLManagedTensor* managed) noexcept;

/** @brief Undoes take_own_export() for an import that failed after it (out of memory). */
void untake_own_export(DLManagedTensorVersioned* managed) noexcept;
/** @brief As above, for a legacy export. */
void untake_own_export(DLManagedTensor* managed) noexcept;

}  // namespace holoscan::detail
