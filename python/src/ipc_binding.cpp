// holoscan_dlpack._core.ipc, re-exported as holoscan_dlpack.ipc (python/holoscan_dlpack/ipc.py).
#include <nanobind/nanobind.h>

#include "ipc_bindings.hpp"

namespace nb = nanobind;

namespace holoscan::python {

void bind_ipc(nb::module_& module) {
  nb::module_ ipc = module.def_submodule(
      "ipc",
      "Tensors across processes (holoscan::ipc): a Listener or Channel.pair() connects two "
      "processes, an Exporter publishes device tensors, an Importer receives them read-only.");
  bind_ipc_channels(ipc);
  bind_ipc_exporter(ipc);
  bind_ipc_importer(ipc);
}

}  // namespace holoscan::python
