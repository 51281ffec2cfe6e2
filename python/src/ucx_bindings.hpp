#pragma once
// holoscan_dlpack._core.ucx: holoscan::ucx for Python, built when holoscan::dlpack_ucx is. A
// Worker closes explicitly (close(), or a with block) or when it is collected; a blocking call
// holds its own reference, so that a close() from another thread never frees what it still uses.
#include <nanobind/nanobind.h>

namespace holoscan::python {

/** @brief Creates the submodule `ucx` of `module` and binds the Worker and its results in it. */
void bind_ucx(nanobind::module_& module);

/** @brief Binds SendResult, Received and WorkerStats. */
void bind_ucx_results(nanobind::module_& module);

/** @brief Binds Worker. */
void bind_ucx_worker(nanobind::module_& module);

}  // namespace holoscan::python
