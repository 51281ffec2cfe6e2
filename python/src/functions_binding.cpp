#include <nanobind/nanobind.h>

#include <holoscan/dlpack_utils.hpp>

#include "bindings.hpp"
#include "imports.hpp"

namespace nb = nanobind;

namespace holoscan::python {

void bind_functions(nb::module_& module) {
  module.def("as_tensor", &as_tensor, nb::arg("obj").none(), nb::kw_only(),
             nb::arg("stream") = nb::none(), Entry(),
             nb::sig("def as_tensor(obj: object, *, stream: object | None = None) -> Tensor"),
             "A Tensor from a Tensor or any object with the DLPack C exchange API, __dlpack__, "
             "__cuda_array_interface__ or __array_interface__ (that order), zero-copy and "
             "read-only; `stream` -1 is refused (Tensor.as_tensor).");
  module.def("from_dlpack", &from_dlpack, nb::arg("obj").none(), nb::kw_only(),
             nb::arg("stream") = nb::none(), nb::arg("copy") = nb::none(), Entry(),
             nb::sig("def from_dlpack(obj: object, *, stream: object | None = None, copy: "
                     "bool | None = None) -> Tensor"),
             "Imports a DLPack producer (or capsule) zero-copy, read-only, ordered for `stream` "
             "(Tensor.from_dlpack).");
  module.attr("HOLOSCAN_DLPACK_IMPL_VERSION_MAJOR") = HOLOSCAN_DLPACK_IMPL_VERSION_MAJOR;
  module.attr("HOLOSCAN_DLPACK_IMPL_VERSION_MINOR") = HOLOSCAN_DLPACK_IMPL_VERSION_MINOR;
}

}  // namespace holoscan::python
