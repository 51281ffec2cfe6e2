#pragma once
// The capsule payload of a copy that `__dlpack__` made for its consumer: the consumer holds the
// only handle on it, so the export itself tells the library when the GPU is done with it.
#include <dlpack/dlpack.h>

#include <holoscan/tensor.hpp>

#include "stream_arg.hpp"

namespace holoscan::python {

/**
 * @brief Exports `copy` (versioned) for a consumer on `consumer`. When the copy is in memory the
 *        GPU reads (CUDA, managed, pinned), the export's deleter first records a deallocation
 *        point on the consumer's stream, so that the copy's memory outlives the work the consumer
 *        queued there before it let go: an explicit stream handle is that stream (which must
 *        still exist then, as Holoscan 5.0 asks of exported views; a CuPy stream is kept alive
 *        until then); None, 1, 2 and -1 are the legacy default stream, whose work waits for every
 *        blocking stream's (every thread's per-thread default stream among them). The deleter
 *        touches no Python object: the stream's owner is let go through release_with_python.
 *        Called with the GIL.
 */
expected<DLManagedTensorVersioned*, Error> export_copy_versioned(const Tensor& copy,
                                                                 const ProtocolStream& consumer);

/** @brief As export_copy_versioned(), in the legacy layout (Tensor::to_dlpack's refusals). */
expected<DLManagedTensor*, Error> export_copy_legacy(const Tensor& copy,
                                                     const ProtocolStream& consumer);

/** @brief What an import found of a copy's export (see take_copy_export()). */
enum class CopyExportTake {
  kNotOne,       ///< Not a copy's export: the import goes on as for any producer's.
  kTaken,        ///< A copy's live export, now the importer's to take as it is.
  kTakenBefore,  ///< A copy's export an import took already: refused.
  kSpent,        ///< A copy's export whose deleter ran: refused.
};

/**
 * @brief Marks `managed` taken by an import when it is a copy's live export (its import flag, as
 *        the library's own export has one): one pointer has one consumer, and a copy's export
 *        owner is reused at once once its deleter runs. Reads only the deleter and manager_ctx
 *        of any other tensor.
 */
CopyExportTake take_copy_export(DLManagedTensorVersioned* managed) noexcept;
/** @brief As above, for a legacy export. */
CopyExportTake take_copy_export(DLManagedTensor* managed) noexcept;
/** @brief Whether `managed` is a copy's export that an import took or whose deleter ran. */
bool copy_export_consumed(DLManagedTensorVersioned* managed) noexcept;
/** @brief Undoes a kTaken take_copy_export() whose import was refused after all. */
void untake_copy_export(DLManagedTensorVersioned* managed) noexcept;
/** @brief As above, for a legacy export. */
void untake_copy_export(DLManagedTensor* managed) noexcept;

}  // namespace holoscan::python
