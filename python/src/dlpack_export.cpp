#include <Python.h>

#include <nanobind/stl/string.h>

#include <string>

#include "devices.hpp"
#include "errors.hpp"
#include "exports.hpp"
#include "stream_arg.hpp"

namespace nb = nanobind;

namespace holoscan::python {
namespace {

constexpr const char* kVersionedName = "dltensor_versioned";
constexpr const char* kLegacyName = "dltensor";

// A consumer renames the capsule when it takes the tensor; one that still has its first name
// was never consumed, so the export is ours to delete (which may release the last owner).
template <class Managed>
void delete_unconsumed(PyObject* capsule, const char* name) noexcept {
  if (PyCapsule_IsValid(capsule, name) == 0) {
    return;
  }
  auto* managed = static_cast<Managed*>(PyCapsule_GetPointer(capsule, name));
  if (managed != nullptr && managed->deleter != nullptr) {
    managed->deleter(managed);
  }
}

void versioned_capsule_destructor(PyObject* capsule) noexcept {
  delete_unconsumed<DLManagedTensorVersioned>(capsule, kVersionedName);
}

void legacy_capsule_destructor(PyObject* capsule) noexcept {
  delete_unconsumed<DLManagedTensor>(capsule, kLegacyName);
}

template <class Managed>
nb::object to_capsule(expected<Managed*, Error> managed, const char* name,
                      PyCapsule_Destructor destructor) {
  if (!managed) {
    raise_error(managed.error(), Raise::kBuffer);
  }
  PyObject* capsule = PyCapsule_New(*managed, name, destructor);
  if (capsule == nullptr) {
    (*managed)->deleter(*managed);
    throw nb::python_error();
  }
  return nb::steal(capsule);
}

bool wants_versioned(nb::handle max_version) {
  if (max_version.is_none()) {
    return false;
  }
  if (!PyTuple_Check(max_version.ptr()) || PyTuple_GET_SIZE(max_version.ptr()) != 2) {
    throw nb::type_error("max_version must be None or a (major, minor) tuple");
  }
  return nb::cast<long>(nb::handle(PyTuple_GET_ITEM(max_version.ptr(), 0))) >= 1;
}

void check_device(const Tensor& tensor, nb::handle dl_device) {
  if (dl_device.is_none()) {
    return;
  }
  const DLDevice ours = tensor.device();
  const auto wanted = nb::cast<nb::tuple>(dl_device);
  if (wanted.size() != 2 || nb::cast<int>(wanted[0]) != ours.device_type ||
      nb::cast<int>(wanted[1]) != ours.device_id) {
    throw nb::buffer_error(("dl_device " + nb::cast<std::string>(nb::repr(dl_device)) +
                            " is not the tensor's device (" + std::to_string(ours.device_type) +
                            ", " + std::to_string(ours.device_id) +
                            "), and holoscan_dlpack exports without copying")
                               .c_str());
  }
}

// The array API: for CUDA, None means the legacy default stream and -1 no synchronization.
void order_consumer(Tensor& tensor, nb::handle stream) {
  const int device_type = tensor.device().device_type;
  if (!cuda_ordered(device_type) && device_type != kDLROCM) {
    if (!stream.is_none() && !(PyLong_Check(stream.ptr()) && nb::cast<long>(stream) == -1)) {
      throw nb::buffer_error("stream must be None for a host tensor");
    }
    return;
  }
  const ProtocolStream consumer = parse_protocol_stream(stream);
  if (consumer.kind == ProtocolStream::Kind::kNoSync || !tensor.has_readiness_stream_contract() ||
      both_legacy_default(tensor.readiness_stream(), consumer.handle)) {
    return;  // no readiness point (ROCm included), or recorded on this very stream
  }
  if (auto ordered = tensor.synchronize_for_consumer_stream(consumer.handle); !ordered) {
    raise_error(ordered.error(), Raise::kBuffer);
  }
}

}  // namespace

nb::object export_dlpack(Tensor& tensor, nb::handle stream, nb::handle max_version,
                         nb::handle dl_device, nb::handle copy) {
  if (copy.ptr() == Py_True) {
    throw nb::buffer_error("copy=True: holoscan_dlpack exports without copying");
  }
  if (!copy.is_none() && copy.ptr() != Py_False) {
    throw nb::type_error("copy must be None, True or False");
  }
  check_device(tensor, dl_device);
  const bool versioned = wants_versioned(max_version);
  order_consumer(tensor, stream);
  if (versioned) {
    return to_capsule(tensor.to_dlpack_versioned(), kVersionedName, &versioned_capsule_destructor);
  }
  return to_capsule(tensor.to_dlpack(), kLegacyName, &legacy_capsule_destructor);
}

nb::tuple dlpack_device(const Tensor& tensor) {
  const DLDevice device = tensor.device();
  return nb::make_tuple(static_cast<int>(device.device_type), device.device_id);
}

}  // namespace holoscan::python
