#pragma once
// Tensors from Python objects: DLPack (capsules, producers, the C exchange API), the array
// interfaces, and Tensors themselves.
#include <nanobind/nanobind.h>

#include <optional>

#include <holoscan/tensor.hpp>

#include "stream_arg.hpp"

namespace holoscan::python {

/**
 * @brief `from_dlpack` (Holoscan 5.0): a read-only Tensor as is, a writable one as a new
 *        read-only wrapper, else the C exchange API or `__dlpack__` (a bare capsule too).
 *        `stream` -1 is refused (no readiness guarantee), 0 is invalid. `copy` (an extension) is
 *        passed to `__dlpack__`.
 */
nanobind::object from_dlpack(nanobind::handle object, nanobind::handle stream,
                             nanobind::handle copy);

/**
 * @brief `as_tensor` (Holoscan 5.0): a Tensor as `from_dlpack` takes it, else the first protocol
 *        the object has, in this order: the DLPack C exchange API, `__dlpack__` (or a capsule),
 *        `__cuda_array_interface__`, `__array_interface__`; TypeError when it has none. `stream`
 *        -1 is refused as `from_dlpack` refuses it.
 */
nanobind::object as_tensor(nanobind::handle object, nanobind::handle stream);

/**
 * @brief Imports a DLPack capsule. Ownership passes (and the capsule is renamed "used_...") only
 *        when the library accepted the tensor; on any rejection the capsule keeps it untouched
 *        and BufferError is raised. `producer` (may be null) is kept alive as long as the
 *        memory where the tensor has no deleter.
 */
Tensor import_capsule(nanobind::handle capsule, nanobind::handle producer);

/**
 * @brief A bare capsule (readiness recorded only for an explicit stream), or a producer: calls
 *        `__dlpack_device__()` once and `__dlpack__` once (max_version, dl_device, copy, and the
 *        consumer stream for CUDA/ROCm producers), falling back to a legacy call without keywords
 *        only when the producer raises TypeError; records the consumer stream as readiness.
 */
Tensor import_protocol(nanobind::handle object, const ProtocolStream& consumer,
                       nanobind::handle copy);

/**
 * @brief Imports the `description` that `object` gave as `__cuda_array_interface__` (v2/v3,
 *        `cuda` true) or `__array_interface__`: the exporter's advertised stream is the readiness
 *        point, and an explicit consumer stream waits for it. `object` is kept alive.
 */
Tensor import_array_interface(nanobind::handle object, nanobind::handle description, bool cuda,
                              const ProtocolStream& consumer);

/**
 * @brief The object whose array interface `managed` was built from (the reference the import
 *        keeps), when `managed` is such an import; else null.
 */
PyObject* array_interface_exporter(const DLManagedTensorVersioned* managed) noexcept;

/**
 * @brief The Tensor behind `object`, an instance of Tensor; TypeError for one whose
 *        construction never ran (Tensor.__new__).
 */
Tensor& initialized_tensor(nanobind::handle object);

/** @brief Records readiness on `stream` after an import ordered on it (nothing for kNoSync). */
void record_import_readiness(Tensor& tensor, const ProtocolStream& stream);

/** @brief Makes an explicit consumer stream (not None, not -1) wait for the readiness point. */
void order_explicit_consumer(Tensor& tensor, const ProtocolStream& consumer);

/**
 * @brief The producer object an import keeps alive, when `tensor` is the only owner of its
 *        memory (one handle on the context, one context on the memory); else null. The collector
 *        may count that reference as the Python owner's: nothing else can reach it.
 */
PyObject* sole_owners_producer(const Tensor& tensor) noexcept;

/**
 * @brief Runs the producer's deleter of a tensor that was ours to free (none when it has no
 *        deleter). The deleter may drop Python objects, whose finalizers are Python code: it runs
 *        under running_python. The caller holds the GIL.
 */
void free_with_producer_deleter(DLManagedTensorVersioned* managed);
/** @brief free_with_producer_deleter() for a legacy managed tensor. */
void free_with_producer_deleter(DLManagedTensor* managed);

/** @brief BufferError, touching nothing, when `managed` has another major version. */
void check_major_version(const DLManagedTensorVersioned& managed);

/**
 * @brief Hands `managed` to the library behind our deleter (the producer's deleter then runs
 *        with the GIL, see python_release.hpp) and keeps `producer` alive as long as the
 *        memory where the tensor has no deleter. On a rejection `managed` is untouched and still
 *        the caller's.
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
