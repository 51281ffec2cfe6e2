#include <Python.h>

#include <nanobind/stl/string.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>

#include <holoscan/dlpack_utils.hpp>

#include "cast_arg.hpp"
#include "copy_export.hpp"
#include "devices.hpp"
#include "dl_types.hpp"
#include "dlpack/dlpack_validate.hpp"
#include "errors.hpp"
#include "exports.hpp"
#include "protocol_streams.hpp"
#include "stream_arg.hpp"
#include "tensor_copy.hpp"
#include "without_gil.hpp"

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
nb::object to_capsule(Managed* managed) {
  constexpr bool kVersioned = std::is_same_v<Managed, DLManagedTensorVersioned>;
  PyObject* capsule =
      PyCapsule_New(managed, kVersioned ? kVersionedName : kLegacyName,
                    kVersioned ? &versioned_capsule_destructor : &legacy_capsule_destructor);
  if (capsule == nullptr) {
    managed->deleter(managed);
    throw nb::python_error();
  }
  return nb::steal(capsule);
}

template <class Managed>
nb::object to_capsule(expected<Managed*, Error> managed) {
  if (!managed) {
    raise_error(managed.error(), Raise::kBuffer);
  }
  return to_capsule(*managed);
}

// A max_version item as a Python int: an int, or what has __index__ (NumPy's integers), as
// nanobind's integer caster takes it; a null object for anything else.
nb::object version_number(nb::handle item) {
  if (PyLong_Check(item.ptr())) {
    return nb::borrow(item);
  }
  if (PyIndex_Check(item.ptr()) == 0) {
    return nb::object();
  }
  // __index__ is Python code, run by this thread: see running_python.
  nb::object number = nb::steal(running_python([&] { return PyNumber_Index(item.ptr()); }));
  if (!number.is_valid()) {
    throw nb::python_error();
  }
  return number;
}

// Holoscan 5.0 (libholoscan_core.so.5, run): max_version and dl_device must be tuples of two
// (a list, a longer tuple or a bare integer is a ValueError there, with these sentences).
bool tuple_of_two(nb::handle value) {
  return PyTuple_Check(value.ptr()) && PyTuple_GET_SIZE(value.ptr()) == 2;
}

// The consumer's max_version: nothing for a legacy capsule; for major 1 or later the minor version
// to stamp, the newest that both sides read (as Holoscan 5.0 stamps it). A tuple of two integers
// (what has __index__ too); integers of any size are valid requests.
std::optional<std::uint32_t> versioned_minor(nb::handle max_version) {
  if (max_version.is_none()) {
    return std::nullopt;
  }
  if (!tuple_of_two(max_version)) {
    throw nb::value_error("max_version must be a tuple of (major, minor)");
  }
  nb::object major_number = version_number(PyTuple_GET_ITEM(max_version.ptr(), 0));
  nb::object minor_number = version_number(PyTuple_GET_ITEM(max_version.ptr(), 1));
  if (!major_number.is_valid() || !minor_number.is_valid()) {
    throw nb::type_error("max_version must be a tuple of (major, minor) integers, or None");
  }
  int overflow = 0;
  const long major = PyLong_AsLongAndOverflow(major_number.ptr(), &overflow);
  if (overflow < 0 || (overflow == 0 && major < 1)) {
    return std::nullopt;
  }
  if (overflow > 0 || major > 1) {
    return HOLOSCAN_DLPACK_IMPL_VERSION_MINOR;  // a newer major reads ours
  }
  const long minor = PyLong_AsLongAndOverflow(minor_number.ptr(), &overflow);
  if (overflow != 0 || minor < 0) {
    return HOLOSCAN_DLPACK_IMPL_VERSION_MINOR;
  }
  return static_cast<std::uint32_t>(std::min<long>(minor, HOLOSCAN_DLPACK_IMPL_VERSION_MINOR));
}

// DLPack 1.1 brought the float8/6/4 type codes and IS_SUBBYTE_TYPE_PADDED: a tensor that uses
// them is never stamped 1.0, whatever the consumer asked for, since a 1.0 reader would misread it.
nb::object to_versioned_capsule(expected<DLManagedTensorVersioned*, Error> managed,
                                std::uint32_t minor) {
  if (!managed) {
    raise_error(managed.error(), Raise::kBuffer);
  }
  DLManagedTensorVersioned& exported = **managed;
  const bool needs_1_1 =
      exported.dl_tensor.dtype.code > kDLBool || (exported.flags & detail::kSubBytePaddedFlag) != 0;
  exported.version.minor = std::max(minor, needs_1_1 ? 1U : 0U);
  return to_capsule(&exported);
}

std::string device_text(DLDevice device) {
  return "(" + std::to_string(static_cast<int>(device.device_type)) + ", " +
         std::to_string(device.device_id) + ")";
}

// Holoscan 5.0: `stream` is ignored for host tensors (CPU, pinned), as a host consumer cannot
// wait on one, but refused as anywhere else when it is no stream (0, -5, a str: run against
// libholoscan_core.so.5). A copy of one into device memory is queued on it, so there it counts.
ProtocolStream consumer_stream(nb::handle stream, DLDevice ours, DLDevice target) {
  const ProtocolStream parsed = parse_protocol_stream(stream);
  if (host_device(ours.device_type) && host_device(target.device_type)) {
    return ProtocolStream{};  // the legacy default stream, for a copy into pinned memory
  }
  return parsed;
}

// For a CUDA tensor the consumer's stream waits for the readiness point. A host consumer cannot
// wait on a stream (and the array API passes none for host memory), so for host tensors the
// stream is ignored and the host waits for a readiness-aware producer instead.
void order_consumer(Tensor& tensor, const ProtocolStream& consumer) {
  const int device_type = tensor.device().device_type;
  if (host_device(device_type)) {
    wait_ready_on_host(tensor);
    return;
  }
  if (!cuda_ordered(device_type) || consumer.kind == ProtocolStream::Kind::kNoSync ||
      !tensor.has_readiness_stream_contract() ||
      ready_on_legacy_default(tensor.readiness_stream(), consumer.handle)) {
    return;  // no readiness point (ROCm included), or recorded on this very stream
  }
  if (auto ordered = order_protocol_consumer(tensor, consumer.handle); !ordered) {
    raise_error(ordered.error(), Raise::kBuffer);
  }
}

// The copy is writable, so any layout may carry it (a legacy capsule refuses only padded
// sub-byte elements, which it cannot describe); it is ready on the consumer's stream, and its
// memory outlives what the consumer queues there.
nb::object export_copy(const Tensor& tensor, DLDevice target, const ProtocolStream& consumer,
                       std::optional<std::uint32_t> versioned) {
  // Holoscan 5.0: a copy from or to device memory is queued on the consumer's stream, which -1
  // does not name (a host copy needs none).
  if (consumer.kind == ProtocolStream::Kind::kNoSync &&
      (cuda_array_device(tensor.device().device_type) || cuda_array_device(target.device_type))) {
    throw nb::buffer_error(
        "stream=-1 cannot order an explicit Tensor copy from or to device memory: pass the "
        "consumer's stream (None or 1 for the legacy default stream)");
  }
  const Tensor copy = copy_for_export(tensor, target, consumer);
  if (versioned) {
    return to_versioned_capsule(export_copy_versioned(copy, consumer), *versioned);
  }
  return to_capsule(export_copy_legacy(copy, consumer));
}

}  // namespace

nb::object export_dlpack(Tensor& tensor, nb::handle stream, nb::handle max_version,
                         nb::handle dl_device, nb::handle copy) {
  if (!copy.is_none() && !PyBool_Check(copy.ptr())) {
    throw nb::type_error("copy must be None, True or False");
  }
  const std::optional<std::uint32_t> versioned = versioned_minor(max_version);
  if (!dl_device.is_none() && !tuple_of_two(dl_device)) {
    throw nb::value_error("dl_device must be a tuple of (device_type, device_id)");
  }
  const DLDevice ours = tensor.device();
  const DLDevice target =
      dl_device.is_none() ? ours : parse_device(dl_device, "dl_device", Bools::kIntegers);
  // Host memory has no owning device: __dlpack_device__ reports id 0, and a consumer that asks
  // for another id asks for a device that does not exist (Holoscan 5.0 refuses it so, copy or
  // not); compared as reported below, it would be taken for the tensor's own. No dl_device asks
  // for the tensor's own device, whatever host id it stores.
  if (!dl_device.is_none() && target.device_id != 0 && protocol_device(target).device_id == 0) {
    raise_invalid_argument("Tensor copy target device is unsupported: dl_device " +
                           device_text(target) + " names a host device other than 0");
  }
  const ProtocolStream consumer = consumer_stream(stream, ours, target);
  // Compared as __dlpack_device__ reports them: a consumer asks for the device it was told of.
  const DLDevice reported = protocol_device(ours);
  const DLDevice asked = protocol_device(target);
  const bool other_device =
      asked.device_type != reported.device_type || asked.device_id != reported.device_id;
  if (other_device && copy.ptr() == Py_False) {
    throw nb::buffer_error(
        ("copy=False cannot satisfy a different dl_device request: " + device_text(target) +
         " is not the tensor's device " + device_text(reported))
            .c_str());
  }
  if (!versioned && tensor.is_read_only()) {
    // Holoscan 5.0's sentence first (libholoscan_core.so.5), then what to do instead. Its
    // docstring refuses a read-only tensor without a versioned capsule whatever `copy` asks.
    throw nb::buffer_error(
        "Legacy DLPack cannot represent read-only Tensor authority or an active read lease: a "
        "read-only tensor is not exported as a legacy capsule (holoscan_dlpack does not widen "
        "access); pass "
        "max_version=(1, 0) or later");
  }
  if (other_device || copy.ptr() == Py_True) {
    return export_copy(tensor, target, consumer, versioned);
  }
  // Exported first, ordered second: an export refused (a writable tensor's export still alive)
  // leaves the consumer's stream without a wait it would never need. A failed ordering drops the
  // capsule, whose destructor gives the export back.
  nb::object capsule = versioned ? to_versioned_capsule(tensor.to_dlpack_versioned(), *versioned)
                                 : to_capsule(tensor.to_dlpack());
  order_consumer(tensor, consumer);
  return capsule;
}

nb::tuple dlpack_device(const Tensor& tensor) {
  const DLDevice device = protocol_device(tensor.device());
  return nb::make_tuple(static_cast<int>(device.device_type), device.device_id);
}

}  // namespace holoscan::python
