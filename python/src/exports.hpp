#pragma once
// Tensors to Python consumers: DLPack and the array interfaces.
#include <nanobind/nanobind.h>

#include <holoscan/tensor.hpp>

namespace holoscan::python {

/**
 * @brief `Tensor.__dlpack__`, Holoscan 5.0's semantics: `stream` None/1 the legacy default
 *        stream, 2 per-thread, -1 no synchronization, a handle, or a `__cuda_stream__()` object
 *        (0 is invalid; ignored, unread, for host tensors, whose readiness the host waits for,
 *        unless copied into device memory). A versioned capsule for max_version >= (1, 0), of
 *        version (1, min(minor, ours)) for a major-1 consumer (never 1.0 for a 1.1 feature),
 *        else legacy, which a read-only tensor refuses (BufferError). `copy=True` or another
 *        `dl_device` gives an owning, writable copy (Tensor::copy_to) ordered on the consumer's
 *        stream (-1 is refused with BufferError when device or managed memory is copied);
 *        `copy=False` with another `dl_device` raises BufferError. An unconsumed capsule frees
 *        its export when it dies.
 */
nanobind::object export_dlpack(Tensor& tensor, nanobind::handle stream,
                               nanobind::handle max_version, nanobind::handle dl_device,
                               nanobind::handle copy);

/** @brief `Tensor.__dlpack_device__`: (device_type, device_id) as plain ints (protocol_device). */
nanobind::tuple dlpack_device(const Tensor& tensor);

/**
 * @brief `__cuda_array_interface__` (v3) of a CUDA or managed tensor; AttributeError else. A
 *        readiness-aware tensor is first ordered before the legacy default stream, which the dict
 *        names (`stream` 1); one without a readiness point says None (nothing to wait for).
 */
nanobind::dict cuda_array_interface(Tensor& tensor);

/**
 * @brief `__array_interface__` (v3) of a host tensor, after waiting on the host for its
 *        readiness point; AttributeError on device tensors.
 */
nanobind::dict array_interface(Tensor& tensor);

/** @brief Blocks (without the GIL) until a readiness-aware tensor's producer finished. */
void wait_ready_on_host(Tensor& tensor);

/** @brief Binds `Tensor.__dlpack_c_exchange_api__` (DLPack 1.3's C exchange API, producer side). */
void bind_exchange_export(nanobind::class_<Tensor>& tensor_type);

}  // namespace holoscan::python
