// find_stream_owner (python/src/stream_owner.cpp, built into this module too) for the tests: the
// copy export that calls it exists only for CUDA memory, which a machine without a GPU cannot
// make, while the lookup itself needs only Python.
#include "stream_owner_probe.hpp"

#include <cstdint>

#include "stream_owner.hpp"

namespace nb = nanobind;

namespace holoscan::python::testing {
namespace {

nb::object find_stream_owner_probe(std::uintptr_t handle) {
  PyObject* owner = find_stream_owner(reinterpret_cast<cudaStream_t>(handle));
  if (PyErr_Occurred() != nullptr) {  // an interruption it leaves raised, or one it should not
    Py_XDECREF(owner);
    throw nb::python_error();
  }
  return owner != nullptr ? nb::steal(owner) : nb::none();
}

}  // namespace

void bind_stream_owner(nb::module_& module) {
  module.def("find_stream_owner", &find_stream_owner_probe, nb::arg("handle"),
             "What a copy's export keeps alive for a consumer stream `handle`: a new reference "
             "to CuPy's current stream object when its ptr is `handle`, else None.");
}

}  // namespace holoscan::python::testing
