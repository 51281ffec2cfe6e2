#pragma once
// Owning copies (the C++ Tensor::copy_to) for Python: `__dlpack__(copy=True)`, exports to another
// device, and the Tensor.copy / Tensor.copy_to extensions.
#include <nanobind/nanobind.h>

#include <dlpack/dlpack.h>

#include <holoscan/tensor.hpp>

#include "stream_arg.hpp"

namespace holoscan::python {

/**
 * @brief The copy `__dlpack__` exports: compact, writable, IS_COPIED, on `target`, ordered on the
 *        consumer's stream as Holoscan 5.0 documents it (None: the legacy default stream). With
 *        -1 (host and pinned memory only: the caller refuses device memory, as 5.0 does) the copy
 *        is made on the legacy default stream and waited for on the host, since the consumer
 *        orders nothing after it. Waits without the GIL; BufferError on failure.
 */
Tensor copy_for_export(const Tensor& tensor, DLDevice target, const ProtocolStream& consumer);

/** @brief Binds Tensor.copy(stream=None) and Tensor.copy_to(device_or_pool, stream=None). */
void bind_tensor_copies(nanobind::class_<Tensor>& tensor_type);

}  // namespace holoscan::python
