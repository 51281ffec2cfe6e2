#pragma once
// Tensors from Python objects: DLPack (capsules and producers) and the array interfaces.
#include <nanobind/nanobind.h>

#include <optional>

#include <holoscan/tensor.hpp>

#include "stream_arg.hpp"

namespace holoscan::python {

/**
 * @brief Imports a DLPack capsule. Ownership passes (and the capsule is renamed "used_...") only
 *        when the library accepted the tensor; on any rejection the capsule keeps it untouched
 *        and BufferError is raised. `producer` (may be null) is kept alive as long as the memory.
 */
Tensor import_capsule(nanobind::handle capsule, nanobind::handle producer);

/**
 * @brief `from_dlpack`: calls `__dlpack_device__()` once and `__dlpack__` once (max_version,
 *        dl_device, copy, and the consumer stream for CUDA/ROCm producers), falling back to a
 *        legacy call without keywords only when the producer raises TypeError; records the
 *        consumer stream as the tensor's readiness. A bare capsule is accepted.
 */
Tensor from_dlpack(nanobind::handle object, nanobind::handle stream, nanobind::handle copy);

/** @brief Imports `__cuda_array_interface__` (v2/v3, `cuda` true) or `__array_interface__`. */
Tensor import_array_interface(nanobind::handle object, bool cuda);

/** @brief `as_tensor`: the object itself if it is a Tensor, else DLPack, then the interfaces. */
nanobind::object as_tensor(nanobind::handle object);

/** @brief Records readiness on `stream` after an import ordered on it (nothing for kNoSync). */
void record_import_readiness(Tensor& tensor, const ProtocolStream& stream);

/** @brief BufferError, touching nothing, when `managed` has another major version. */
void check_major_version(const DLManagedTensorVersioned& managed);

/**
 * @brief Hands `managed` to the library behind our deleter (the producer's deleter then runs
 *        with the GIL, see python_release.hpp) and keeps `producer` alive as long as the memory.
 *        On a rejection `managed` is untouched and still the caller's.
 */
expected<Tensor, Error> adopt_versioned(DLManagedTensorVersioned* managed,
                                        nanobind::handle producer);

/**
 * @brief Imports through DLPack 1.3's C exchange API when the object's type publishes one
 *        (`__dlpack_c_exchange_api__`, e.g. torch >= 2.10): no Python call; the producer's current
 *        work stream becomes the readiness point and `consumer` waits on it. Nothing (and no
 *        call) when the type has none.
 */
std::optional<Tensor> import_through_exchange_api(nanobind::handle object,
                                                  const ProtocolStream& consumer);

}  // namespace holoscan::python
