// holoscan_dlpack._core: owned, stream-ordered DLPack tensors for Python. No test hooks: the
// suite's helpers are a separate extension (tests/python/ext).
#include <nanobind/nanobind.h>

#include "bindings.hpp"
#include "ipc_bindings.hpp"
#ifdef HOLOSCAN_DLPACK_PYTHON_UCX
#include "ucx_bindings.hpp"
#endif

namespace nb = nanobind;

NB_MODULE(_core, module) {
  module.doc() = "Owned, stream-ordered DLPack tensors (holoscan-dlpack), nanobind extension.";
  holoscan::python::bind_enums(module);
  holoscan::python::bind_dl_types(module);
  holoscan::python::bind_tensor(module);
  holoscan::python::bind_functions(module);
  holoscan::python::bind_release_controls(module);
  holoscan::python::bind_pool(module);
  holoscan::python::bind_ipc(module);  // the submodule holoscan_dlpack._core.ipc
#ifdef HOLOSCAN_DLPACK_PYTHON_UCX
  holoscan::python::bind_ucx(module);  // the submodule holoscan_dlpack._core.ucx
#endif
}
