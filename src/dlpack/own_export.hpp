#pragma once
// This library's own exports, as an import meets them again: one pointer has one consumer
// (DLPack's rule), and an export's owner is recycled at once when its deleter runs, so a second
// import of one pointer would run the deleter of a later export that took the same block, and an
// import after the deleter ran would take in a tensor whose memory may be gone.
#include <dlpack/dlpack.h>

#include <atomic>

namespace holoscan::detail {

/**
 * @brief Whether an import took `managed` already, when it is this library's live export: its
 *        flag, which an import sets as it takes ownership (a second import finds it set and is
 *        refused); null for any other tensor.
 */
std::atomic<bool>* own_export_taken(DLManagedTensorVersioned* managed) noexcept;
/** @brief As above, for a legacy export. */
std::atomic<bool>* own_export_taken(DLManagedTensor* managed) noexcept;

/**
 * @brief Whether `managed` is this library's export whose deleter ran already (a consumer let go
 *        of it): only its deleter and manager_ctx are read, the fields an export's memory keeps
 *        readable for good (kept_blocks.hpp), so that nothing of the gone tensor is taken in.
 */
bool own_export_spent(DLManagedTensorVersioned* managed) noexcept;
/** @brief As above, for a legacy export. */
bool own_export_spent(DLManagedTensor* managed) noexcept;

}  // namespace holoscan::detail
