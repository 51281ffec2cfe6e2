// holoscan_dlpack._core: owned, stream-ordered DLPack tensors for Python.
#include <nanobind/nanobind.h>

#include "bindings.hpp"

namespace nb = nanobind;

NB_MODULE(_core, module) {
  module.doc() = "Owned, stream-ordered DLPack tensors (holoscan-dlpack), nanobind extension.";
  holoscan::python::bind_tensor(module);
  holoscan::python::bind_functions(module);
  holoscan::python::bind_pool(module);
  holoscan::python::bind_testing(module);
}
