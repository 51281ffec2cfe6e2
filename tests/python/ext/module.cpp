// holoscan_dlpack_testing: the test suite's helpers, an extension of its own so that the shipped
// holoscan_dlpack._core holds no test hooks. A counting DLPack producer (capsules, and a type with
// DLPack's C exchange API), a C exchange API consumer, and probes that drop the last owner of a
// Tensor on threads Python does not know; and the stream owner lookup of copy exports. It links no
// copy of the library: it reaches Tensors only through the protocols any other consumer uses.
#include <nanobind/nanobind.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <vector>

#include "holder.hpp"
#include "producer.hpp"
#include "stream_owner_probe.hpp"

namespace nb = nanobind;

namespace holoscan::python::testing {
namespace {

nb::object make_capsule(unsigned major, unsigned minor, bool versioned, std::uint64_t flags,
                        const std::vector<std::int64_t>& shape, nb::tuple dtype, nb::tuple device,
                        bool gil_deleter, bool throwing_deleter, bool null_data,
                        std::uintptr_t address, std::uint64_t byte_offset) {
  ProducerSpec spec;
  spec.version = DLPackVersion{major, minor};
  spec.flags = flags;
  spec.shape = shape;
  spec.dtype = DLDataType{nb::cast<std::uint8_t>(dtype[0]), nb::cast<std::uint8_t>(dtype[1]),
                          nb::cast<std::uint16_t>(dtype[2])};
  spec.device = DLDevice{static_cast<DLDeviceType>(nb::cast<int>(device[0])),
                         nb::cast<std::int32_t>(device[1])};
  spec.gil_deleter = gil_deleter;
  spec.throwing_deleter = throwing_deleter;
  spec.null_data = null_data;
  spec.address = address;
  spec.byte_offset = byte_offset;
  PyObject* capsule = nullptr;
  if (versioned) {
    DLManagedTensorVersioned* managed = make_versioned(spec);
    capsule = PyCapsule_New(managed, "dltensor_versioned", &capsule_destructor);
    if (capsule == nullptr) {
      managed->deleter(managed);
    }
  } else {
    DLManagedTensor* managed = make_legacy(spec);
    capsule = PyCapsule_New(managed, "dltensor", &capsule_destructor);
    if (capsule == nullptr) {
      managed->deleter(managed);
    }
  }
  if (capsule == nullptr) {
    throw nb::python_error();
  }
  return nb::steal(capsule);
}

}  // namespace
}  // namespace holoscan::python::testing

NB_MODULE(holoscan_dlpack_testing, module) {
  namespace testing = holoscan::python::testing;
  module.doc() = "Test helpers of holoscan_dlpack (not shipped).";
  module.def("make_capsule", &testing::make_capsule, nb::kw_only(), nb::arg("major") = 1,
             nb::arg("minor") = 0, nb::arg("versioned") = true, nb::arg("flags") = 0,
             nb::arg("shape") = std::vector<std::int64_t>{4},
             nb::arg("dtype") = nb::make_tuple(2, 32, 1), nb::arg("device") = nb::make_tuple(1, 0),
             nb::arg("gil_deleter") = false, nb::arg("throwing_deleter") = false,
             nb::arg("null_data") = false, nb::arg("address") = 0, nb::arg("byte_offset") = 0,
             "A DLPack capsule over new host memory (or over `address`, not owned) whose deleter "
             "is counted (and, versioned with throwing_deleter, then throws).");
  module.def("deleter_calls", &testing::deleter_calls,
             "Deleter calls of the test producers' tensors so far.");
  module.def("last_deleter_thread", &testing::last_deleter_thread,
             "threading.get_ident() of the thread the last counted deleter ran on.");
  testing::bind_holder(module);
  testing::bind_exchange(module);
  testing::bind_stream_owner(module);
}
