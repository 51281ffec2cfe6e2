#include <nanobind/nanobind.h>

#include <holoscan/deferred_release.hpp>
#include <holoscan/dlpack_utils.hpp>

#include "bindings.hpp"
#include "imports.hpp"

namespace nb = nanobind;

namespace holoscan::python {

void bind_functions(nb::module_& module) {
  module.def("as_tensor", &as_tensor, nb::arg("obj"), nb::kw_only(), nb::arg("stream") = nb::none(),
             Entry(),
             nb::sig("def as_tensor(obj: object, *, stream: object | None = None) -> Tensor"),
             "A Tensor from a Tensor or any object with the DLPack C exchange API, __dlpack__, "
             "__cuda_array_interface__ or __array_interface__ (that order), zero-copy and "
             "read-only (Tensor.as_tensor).");
  module.def("from_dlpack", &from_dlpack, nb::arg("obj"), nb::kw_only(),
             nb::arg("stream") = nb::none(), nb::arg("copy") = nb::none(), Entry(),
             nb::sig("def from_dlpack(obj: object, *, stream: object | None = None, copy: "
                     "bool | None = None) -> Tensor"),
             "Imports a DLPack producer (or capsule) zero-copy, read-only, ordered for `stream` "
             "(Tensor.from_dlpack).");
  module.def(
      "flush_deferred_releases",
      [] {
        {
          // The releases waited for may need this thread's GIL (they queue for it): let go.
          nb::gil_scoped_release unlocked;
          flush_deferred_releases();
        }
        drain_python_releases();
      },
      Entry(), "Blocks until every release deferred before the call has run, Python ones too.");
  module.def(
      "pending_deferred_releases", [] { return pending_deferred_releases(); }, Entry(),
      "Releases the library has queued and not yet run.");
  module.attr("HOLOSCAN_DLPACK_IMPL_VERSION_MAJOR") = HOLOSCAN_DLPACK_IMPL_VERSION_MAJOR;
  module.attr("HOLOSCAN_DLPACK_IMPL_VERSION_MINOR") = HOLOSCAN_DLPACK_IMPL_VERSION_MINOR;

  // Before finalization begins, and while every module is whole: run what is queued, then stop
  // queueing, since no Python thread will drain again and Py_AddPendingCall is unsafe later on.
  nb::module_::import_("atexit").attr("register")(nb::cpp_function([] { stop_python_releases(); }));
}

}  // namespace holoscan::python
