#pragma once
// Tensors to Python consumers: DLPack and the array interfaces.
#include <nanobind/nanobind.h>

#include <holoscan/tensor.hpp>

namespace holoscan::python {

/**
 * @brief `Tensor.__dlpack__`: orders the consumer stream after the readiness point, then exports
 *        a versioned capsule (max_version >= (1, 0)) or a legacy one; an unconsumed capsule frees
 *        its export when it dies.
 */
nanobind::object export_dlpack(Tensor& tensor, nanobind::handle stream,
                               nanobind::handle max_version, nanobind::handle dl_device,
                               nanobind::handle copy);

/** @brief `Tensor.__dlpack_device__`: (device_type, device_id). */
nanobind::tuple dlpack_device(const Tensor& tensor);

/** @brief `__cuda_array_interface__` (v3) of a CUDA or managed tensor; AttributeError else. */
nanobind::dict cuda_array_interface(Tensor& tensor);

/**
 * @brief `__array_interface__` (v3) of a host tensor, after waiting on the host for its
 *        readiness point; AttributeError on device tensors.
 */
nanobind::dict array_interface(Tensor& tensor);

}  // namespace holoscan::python
