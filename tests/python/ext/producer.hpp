#pragma once
// The test suite's DLPack producer: host tensors whose deleter calls are counted.
#include <Python.h>

#include <dlpack/dlpack.h>

#include <cstdint>
#include <vector>

namespace holoscan::python::testing {

/** @brief What a test tensor looks like; invalid values are allowed, to test rejections. */
struct ProducerSpec {
  DLPackVersion version{1, 0};         ///< Versioned tensors only.
  std::uint64_t flags = 0;             ///< Versioned tensors only.
  std::vector<std::int64_t> shape{4};  ///< Extents (element strides are left null).
  DLDataType dtype{kDLFloat, 32, 1};   ///< Element type.
  DLDevice device{kDLCPU, 0};          ///< Reported device; new memory is always host.
  bool gil_deleter = false;            ///< The deleter takes the GIL, as NumPy's does.
  bool throwing_deleter = false;       ///< The deleter frees, then throws (a faulty C++ producer).
  bool null_data = false;              ///< Give a null data pointer.
  std::uintptr_t address = 0;          ///< Describe this memory (not owned) instead of new bytes.
  std::uint64_t byte_offset = 0;       ///< Bytes before the first element (new memory only).
};

/** @brief A new versioned managed tensor; ownership goes to the caller. */
DLManagedTensorVersioned* make_versioned(const ProducerSpec& spec);
/** @brief A new legacy managed tensor (version and flags unused). */
DLManagedTensor* make_legacy(const ProducerSpec& spec);

/** @brief The producer's side of the capsule protocol: an unconsumed capsule frees its tensor. */
void capsule_destructor(PyObject* capsule) noexcept;

/** @brief Deleter calls of every tensor made so far. */
int deleter_calls() noexcept;
/** @brief pthread_self() (= threading.get_ident()) of the last deleter call. */
unsigned long last_deleter_thread() noexcept;

}  // namespace holoscan::python::testing
