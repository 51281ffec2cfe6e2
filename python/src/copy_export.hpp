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

}  // namespace holoscan::python
