#pragma once
// The pieces of the module, each bound by its own file.
#include <nanobind/nanobind.h>

#include "python_release.hpp"

namespace holoscan::python {

/** @brief Annotation for every bound function: drain queued releases on entry. */
using Entry = nanobind::call_guard<ModuleEntry>;

/** @brief Binds the IntEnums DLDeviceType, DLDataTypeCode and ErrorCode. */
void bind_enums(nanobind::module_& module);

/** @brief Binds DLDevice and DLDataType. */
void bind_dl_types(nanobind::module_& module);

/** @brief Binds holoscan.Tensor: properties, stream hooks, DLPack and the array interfaces. */
void bind_tensor(nanobind::module_& module);

/** @brief Binds as_tensor, from_dlpack and the version constants. */
void bind_functions(nanobind::module_& module);

/** @brief Binds the release thread's controls: flush, counts, ReleaseThreadOptions. */
void bind_release_controls(nanobind::module_& module);

/** @brief Binds TensorPool and PoolMemory. */
void bind_pool(nanobind::module_& module);

}  // namespace holoscan::python
