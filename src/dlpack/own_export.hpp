#pragma once
// This library's own exports, as an import meets them again: one pointer has one consumer
// (DLPack's rule), and an export's owner is recycled at once when its deleter runs, so a second
// import of one pointer would run the deleter of a later export that took the same block, and an
// import after the deleter ran would take in a tensor whose memory may be gone.
#include <dlpack/dlpack.h>

#include <atomic>

#include "holoscan/errors.hpp"
#include "wing_api.hpp"

namespace holoscan::detail {

/**
 * @brief Whether `managed` is this library's export, live or spent (its deleter is the export's):
 *        a wing that wraps a producer's deleter (the Python import) imports such a tensor as it
 *        is instead, so that the import's checks below still recognise it.
 */
HOLOSCAN_DLPACK_WING_API bool is_own_export(DLManagedTensorVersioned* managed) noexcept;
/** @brief As above, for a legacy export. */
HOLOSCAN_DLPACK_WING_API bool is_own_export(DLManagedTensor* managed) noexcept;

/**
 * @brief Whether `managed` is this library's export that an import took or whose deleter ran: its
 *        deleter is no longer its holder's to call (it would free the memory under the import
 *        that owns it), even where a refused tensor is freed (the C exchange API's import).
 */
HOLOSCAN_DLPACK_WING_API bool own_export_consumed(DLManagedTensorVersioned* managed) noexcept;

/** @brief The refusal of an export an import took before (`who`: the importing call). */
HOLOSCAN_DLPACK_WING_API Error export_taken_error(const char* who);
/** @brief The refusal of an export whose deleter ran already (`who`: the importing call). */
HOLOSCAN_DLPACK_WING_API Error export_spent_error(const char* who);

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
