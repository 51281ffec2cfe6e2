#include <Python.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <limits>
#include <new>
#include <optional>
#include <string>

#include <holoscan/dl_managed_memory_buffer.hpp>
#include <holoscan/dlpack_utils.hpp>
#include <holoscan/stream_tracked_reference.hpp>

#include "cast_arg.hpp"
#include "copy_export.hpp"
#include "devices.hpp"
#include "dlpack/own_export.hpp"
#include "dlpack/producer_deleter.hpp"
#include "errors.hpp"
#include "held_reference.hpp"
#include "imports.hpp"
#include "protocol_streams.hpp"
#include "python_release.hpp"
#include "stream/reference_holds.hpp"
#include "without_gil.hpp"

namespace nb = nanobind;

namespace holoscan::python {
namespace {

constexpr const char* kVersionedName = "dltensor_versioned";
constexpr const char* kLegacyName = "dltensor";
constexpr const char* kUsedVersionedName = "used_dltensor_versioned";
constexpr const char* kUsedLegacyName = "used_dltensor";

// The producer's managed tensor, lent to the library with our deleter in place of the producer's.
// The library calls our deleter on whatever thread drops the last owner; it puts the producer's
// deleter and manager_ctx back (no Python involved) and hands the rest to release_with_python,
// which runs the producer's deleter and drops our reference to the producer (if one is held)
// with the GIL held.
template <class Managed>
struct ProducerOwner final : PythonRelease {
  Managed* managed = nullptr;
  void (*producer_deleter)(Managed*) = nullptr;
  void* producer_context = nullptr;
  // A strong reference to the producer object only where its tensor has no deleter: nothing
  // else may keep that memory alive. Otherwise the tensor owns its memory (DLPack's rule) and
  // the object is not held, as 5.0, torch and NumPy hold none: holding it made cycles through
  // objects the collector cannot see into (a NumPy array's base, a capsule) that were never freed.
  PyObject* producer = nullptr;

  void lend() noexcept {
    producer_deleter = managed->deleter;
    producer_context = managed->manager_ctx;
    managed->manager_ctx = this;
    managed->deleter = &library_deleter;
  }

  void give_back() noexcept {
    managed->manager_ctx = producer_context;
    managed->deleter = producer_deleter;
  }

  static void library_deleter(Managed* self) noexcept {
    auto* owner = static_cast<ProducerOwner*>(self->manager_ctx);
    owner->give_back();
    release_with_python(owner);
  }

  static void run_release(PythonRelease* node, bool python_alive) noexcept {
    auto* owner = static_cast<ProducerOwner*>(node);
    // After finalization the producer's deleter may need the GIL (NumPy's, CuPy's): leak it.
    if (python_alive) {
      ErrorIndicatorGuard keep_callers_error;
      // A C++ producer may throw through its deleter: contained and counted, as the library
      // does for the deleters it runs itself (failed_releases()).
      free_with_producer_deleter(owner->managed);
      // Its finalizers are Python code, run from this noexcept path: see running_python.
      running_python([&] { Py_XDECREF(owner->producer); });
    }
    delete owner;
  }
};

expected<Tensor, Error> make_tensor(DLManagedTensorVersioned* managed) {
  return make_tensor_from_dlpack_versioned(managed);
}
expected<Tensor, Error> make_tensor(DLManagedTensor* managed) {
  return make_tensor_from_dlpack(managed);
}

constexpr const char* importer(DLManagedTensorVersioned*) {
  return "make_tensor_from_dlpack_versioned";
}
constexpr const char* importer(DLManagedTensor*) { return "make_tensor_from_dlpack"; }

// This library's exports keep their own deleters, which need no Python: a wrapper would hide the
// deleter by which a second import of one pointer, or an import after its deleter ran, is told
// and refused (the second would run the deleter of a later export reusing the same owner).
// Nothing (nullopt) for any other tensor.
template <class Managed>
std::optional<expected<Tensor, Error>> import_own_export(Managed* managed) {
  if (holoscan::detail::is_own_export(managed)) {
    return make_tensor(managed);  // the library's import tells the two cases itself
  }
  switch (take_copy_export(managed)) {
    case CopyExportTake::kNotOne:
      return std::nullopt;
    case CopyExportTake::kSpent:
      return tl::unexpected<Error>(holoscan::detail::export_spent_error(importer(managed)));
    case CopyExportTake::kTakenBefore:
      return tl::unexpected<Error>(holoscan::detail::export_taken_error(importer(managed)));
    case CopyExportTake::kTaken:
      break;
  }
  auto tensor = make_tensor(managed);
  if (!tensor) {
    untake_copy_export(managed);  // refused: still the caller's, untaken
  }
  return tensor;
}

// Lends `managed` to the library with our deleter; on a rejection gives it back untouched.
template <class Managed>
expected<Tensor, Error> adopt(Managed* managed, nb::handle producer) {
  if (auto own = import_own_export(managed)) {
    return std::move(*own);
  }
  // Out of memory is an error returned, not thrown: a caller that frees a refused tensor (the C
  // exchange API's import) only does so on an error.
  auto* owner = new (std::nothrow) ProducerOwner<Managed>();
  if (owner == nullptr) {
    return tl::unexpected<Error>(
        Error{ErrorCode::kResourceExhausted, "DLPack import: out of host memory", 0});
  }
  owner->run = &ProducerOwner<Managed>::run_release;
  owner->managed = managed;
  owner->lend();
  auto tensor = make_tensor(managed);
  if (!tensor) {
    // Holoscan's rule: a rejection leaves ownership with the caller, and no deleter ran.
    owner->give_back();
    delete owner;
    return tensor;
  }
  if (producer.is_valid() && owner->producer_deleter == nullptr) {
    owner->producer = producer.inc_ref().ptr();
  }
  return tensor;
}

template <class Managed>
Tensor import_managed(nb::handle capsule, const char* name, const char* used_name,
                      nb::handle producer) {
  auto* managed = static_cast<Managed*>(PyCapsule_GetPointer(capsule.ptr(), name));
  if (managed == nullptr) {
    throw nb::python_error();
  }
  if constexpr (std::is_same_v<Managed, DLManagedTensorVersioned>) {
    check_major_version(*managed);  // before anything is written into it
  }
  auto tensor = adopt(managed, producer);
  if (!tensor) {
    raise_error(tensor.error(), Raise::kBuffer);  // the capsule keeps the tensor
  }
  // Ownership has passed: from here the capsule must not free the tensor.
  if (PyCapsule_SetName(capsule.ptr(), used_name) != 0) {
    PyErr_Clear();  // cannot fail on a valid capsule; the tensor is ours either way
  }
  return std::move(*tensor);
}

PyObject* interned(const char* text) {
  PyObject* name = PyUnicode_InternFromString(text);
  if (name == nullptr) {
    throw nb::python_error();
  }
  return name;  // kept for the life of the process, as CPython keeps interned strings
}

struct Names {
  PyObject* dlpack = interned("__dlpack__");
  PyObject* dlpack_device = interned("__dlpack_device__");
  PyObject* keywords = nullptr;              // max_version, copy
  PyObject* keywords_with_stream = nullptr;  // ... and stream
  PyObject* stream_keyword = nullptr;        // stream alone, as producers before DLPack 1.0 take it
  PyObject* max_version = nullptr;

  Names() {
    keywords = Py_BuildValue("(ss)", "max_version", "copy");
    keywords_with_stream = Py_BuildValue("(sss)", "max_version", "copy", "stream");
    stream_keyword = Py_BuildValue("(s)", "stream");
    max_version = Py_BuildValue("(II)", HOLOSCAN_DLPACK_IMPL_VERSION_MAJOR,
                                HOLOSCAN_DLPACK_IMPL_VERSION_MINOR);
    if (keywords == nullptr || keywords_with_stream == nullptr || stream_keyword == nullptr ||
        max_version == nullptr) {
      throw nb::python_error();
    }
  }
};

const Names& names() {
  static const Names* instance = new Names();  // first use holds the GIL; never freed
  return *instance;
}

int dlpack_device_type(nb::handle device) {
  if (!PyTuple_Check(device.ptr()) || PyTuple_GET_SIZE(device.ptr()) != 2) {
    throw nb::type_error("__dlpack_device__() must return a (device_type, device_id) tuple");
  }
  PyObject* item = PyTuple_GET_ITEM(device.ptr(), 0);
  int overflow = 0;
  // An item that is no int is read through its __index__, Python code: see running_python.
  const long long type =
      running_python([&] { return PyLong_AsLongLongAndOverflow(item, &overflow); });
  if (type == -1 && PyErr_Occurred() != nullptr) {
    throw nb::python_error();
  }
  // DLDeviceType is 32 bits: cut to them, 2**32 + 2 would be taken for CUDA (and handed a stream).
  if (overflow != 0 || type < std::numeric_limits<std::int32_t>::min() ||
      type > std::numeric_limits<std::int32_t>::max()) {
    throw nb::buffer_error(("__dlpack_device__() gave device type " + display_text(item) +
                            ", which is not a DLPack device type (32 bits)")
                               .c_str());
  }
  return static_cast<int>(type);
}

// A capsule's name for a message: any C string, so bytes outside printable ASCII are written
// as \xNN (a message must be UTF-8, which Python decodes when it raises).
std::string capsule_name_text(const char* name) {
  std::string text;
  for (const char* c = name; *c != '\0'; ++c) {
    const auto byte = static_cast<unsigned char>(*c);
    if (byte >= 0x20 && byte < 0x7f && byte != '\\') {
      text += *c;
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      text += {'\\', 'x', kHex[byte >> 4], kHex[byte & 0xf]};
    }
  }
  return text;
}

nb::object protocol_value(const ProtocolStream& stream) {
  switch (stream.kind) {
    case ProtocolStream::Kind::kDefault:
      return nb::none();
    case ProtocolStream::Kind::kNoSync:
      return nb::int_(-1);
    case ProtocolStream::Kind::kStream:
      break;
  }
  return nb::int_(stream.value);
}

// The producer object behind `reference` when it is one of our imports of a `Managed` tensor.
template <class Buffer, class Managed>
PyObject* imported_producer(TensorMemoryReference* reference) noexcept {
  const auto* buffer = dynamic_cast<const Buffer*>(reference);
  Managed* managed = buffer != nullptr ? buffer->managed_tensor() : nullptr;
  if (managed == nullptr || managed->deleter != &ProducerOwner<Managed>::library_deleter) {
    return nullptr;
  }
  return static_cast<ProducerOwner<Managed>*>(managed->manager_ctx)->producer;
}

// Raises what is set now with `earlier` (taken from the holder) as its context, as a `raise` in
// Python's `except` block of the earlier one would, and hands it to nanobind.
[[noreturn]] void throw_with_context(HeldReference& earlier) {
  HeldReference raised = take_raised_exception();
  PyObject* exception = raised.get();
  if (exception != nullptr && earlier.is_valid() && exception != earlier.get()) {
    if (PyObject* context = PyException_GetContext(exception); context == nullptr) {
      PyException_SetContext(exception, earlier.get());  // steals the reference given to it
      Py_INCREF(earlier.get());
    } else {
      Py_DECREF(context);
    }
  }
  restore_raised_exception(std::move(raised));
  throw nb::python_error();
}

}  // namespace

PyObject* sole_owners_producer(const Tensor& tensor) noexcept {
  // Nobody can copy a handle without holding one, and the Python owner is held under the GIL:
  // counts of one cannot grow while the collector looks.
  const std::shared_ptr<DLManagedTensorContext>& context = tensor.dl_ctx();
  if (context == nullptr || context.use_count() != 1 ||
      context->memory_reference.use_count() != 1) {
    return nullptr;
  }
  TensorMemoryReference* reference = context->memory_reference.get();
  // An export of an import holds its owner apart from the shared_ptr (the owner lives by its
  // holds): then the Tensor is not the producer's only way out. The counts above are relaxed
  // loads: the fence orders the holds' load after the drops they saw (an export taken through a
  // copy of this Tensor, then the copy dropped, on a thread without the GIL).
  std::atomic_thread_fence(std::memory_order_acquire);
  if (const auto* tracked = dynamic_cast<const StreamTrackedReference*>(reference);
      tracked != nullptr && holoscan::detail::ReferenceHolds::export_holds(*tracked) != 0) {
    return nullptr;
  }
  PyObject* producer =
      imported_producer<DLManagedMemoryBufferVersioned, DLManagedTensorVersioned>(reference);
  if (producer == nullptr) {
    producer = imported_producer<DLManagedMemoryBuffer, DLManagedTensor>(reference);
  }
  if (producer == nullptr) {  // an array interface's import keeps its exporting object
    const auto* buffer = dynamic_cast<const DLManagedMemoryBufferVersioned*>(reference);
    producer = array_interface_exporter(buffer != nullptr ? buffer->managed_tensor() : nullptr);
  }
  return producer;
}

void check_major_version(const DLManagedTensorVersioned& managed) {
  // Another major version: only `version` may be read, and nothing may be written.
  if (managed.version.major != HOLOSCAN_DLPACK_IMPL_VERSION_MAJOR) {
    throw nb::buffer_error(
        ("unsupported DLPack major version " + std::to_string(managed.version.major) + " (DLPack " +
         std::to_string(managed.version.major) + "." + std::to_string(managed.version.minor) +
         "; this build reads major version " + std::to_string(HOLOSCAN_DLPACK_IMPL_VERSION_MAJOR) +
         "); the producer keeps the tensor")
            .c_str());
  }
}

namespace {
template <typename Managed>
void free_managed(Managed* managed) {
  if (managed != nullptr && managed->deleter != nullptr) {
    running_python([managed] { detail::run_producer_deleter_letting_threads_end(managed); });
  }
}
}  // namespace

void free_with_producer_deleter(DLManagedTensorVersioned* managed) { free_managed(managed); }
void free_with_producer_deleter(DLManagedTensor* managed) { free_managed(managed); }

expected<Tensor, Error> adopt_versioned(DLManagedTensorVersioned* managed, nb::handle producer) {
  return adopt(managed, producer);
}

Tensor import_capsule(nb::handle capsule, nb::handle producer) {
  const char* name = PyCapsule_GetName(capsule.ptr());
  if (name == nullptr) {
    if (PyErr_Occurred() != nullptr) {
      throw nb::python_error();
    }
    throw nb::type_error("invalid DLPack capsule: the capsule has no name");
  }
  if (std::strcmp(name, kVersionedName) == 0) {
    return import_managed<DLManagedTensorVersioned>(capsule, kVersionedName, kUsedVersionedName,
                                                    producer);
  }
  if (std::strcmp(name, kLegacyName) == 0) {
    return import_managed<DLManagedTensor>(capsule, kLegacyName, kUsedLegacyName, producer);
  }
  if (std::strcmp(name, kUsedVersionedName) == 0 || std::strcmp(name, kUsedLegacyName) == 0) {
    throw nb::buffer_error("invalid DLPack capsule: the DLPack capsule was already consumed");
  }
  throw nb::type_error(("invalid DLPack capsule: a capsule named '" + capsule_name_text(name) +
                        "' is not a DLPack capsule ('dltensor_versioned' or 'dltensor')")
                           .c_str());
}

void record_import_readiness(Tensor& tensor, const ProtocolStream& stream) {
  if (stream.kind == ProtocolStream::Kind::kNoSync || !cuda_ordered(tensor.device().device_type)) {
    return;
  }
  // False (no driver, a capturing stream) leaves no readiness contract: the data is still ready
  // for the consumer stream the producer ordered itself on, which is all it was asked for.
  (void)set_protocol_readiness(tensor, stream.handle);
}

Tensor import_protocol(nb::handle object, const ProtocolStream& consumer, nb::handle copy) {
  if (PyCapsule_CheckExact(object.ptr())) {
    // The producer's __dlpack__ was called by the caller, for the stream if one is given, and for
    // a copy if one was wanted: this import aliases the capsule's memory, which is no copy.
    if (copy.ptr() == Py_True) {
      throw nb::buffer_error(
          "copy=True cannot be honoured for a DLPack capsule, which is imported as it is: pass "
          "the producer, or import the capsule of its __dlpack__(copy=True)");
    }
    Tensor tensor = import_capsule(object, nb::handle());
    if (consumer.kind != ProtocolStream::Kind::kDefault) {
      record_import_readiness(tensor, consumer);
    }
    return tensor;
  }
  const Names& n = names();
  // The producer's methods are Python code, run by this thread: see running_python. What they
  // return is dropped the same way (held_reference.hpp).
  const HeldReference device(
      running_python([&] { return PyObject_CallMethodNoArgs(object.ptr(), n.dlpack_device); }));
  if (!device.is_valid()) {
    throw nb::python_error();
  }
  const int reported_type = dlpack_device_type(device.get());  // read once: __index__ is Python
  const bool pass_stream = producer_takes_stream(reported_type);
  nb::object stream_value = pass_stream ? protocol_value(consumer) : nb::object();

  // No dl_device: left out it means the producer's own device (what it just reported), and
  // Holoscan 5.0 names none; a producer that reports a host id other than 0 (NumPy refuses any
  // dl_device but (1, 0)) would refuse its own answer handed back.
  PyObject* args[] = {object.ptr(), n.max_version, copy.ptr(), stream_value.ptr()};
  HeldReference capsule(running_python([&] {
    return PyObject_VectorcallMethod(n.dlpack, args, 1,
                                     pass_stream ? n.keywords_with_stream : n.keywords);
  }));
  // Whether the producer was called without the consumer's stream.
  bool legacy_call = false;
  if (!capsule.is_valid()) {
    // Only a producer that predates the keywords (TypeError) is asked again, the old way: with
    // the stream alone where it takes one (DLPack before 1.0), so that it still orders its work
    // for the consumer's stream, else with nothing.
    if (!PyErr_ExceptionMatches(PyExc_TypeError) || copy.ptr() == Py_True) {
      throw nb::python_error();
    }
    // Kept as the context of what the older calls raise: a producer that does take the keywords
    // and raised a TypeError of its own would otherwise see it replaced by "unexpected keyword".
    HeldReference first_error = take_raised_exception();
    if (pass_stream) {
      PyObject* stream_args[] = {object.ptr(), stream_value.ptr()};
      capsule.reset(running_python(
          [&] { return PyObject_VectorcallMethod(n.dlpack, stream_args, 1, n.stream_keyword); }));
      if (!capsule.is_valid()) {
        if (!PyErr_ExceptionMatches(PyExc_TypeError)) {
          throw_with_context(first_error);
        }
        PyErr_Clear();
      }
    }
    if (!capsule.is_valid()) {
      capsule.reset(
          running_python([&] { return PyObject_CallMethodNoArgs(object.ptr(), n.dlpack); }));
      if (!capsule.is_valid()) {
        throw_with_context(first_error);
      }
      legacy_call = true;
    }
  }
  if (!PyCapsule_CheckExact(capsule.get())) {
    throw nb::type_error(("__dlpack__ did not return a valid DLPack capsule: it returned " +
                          type_text(nb::handle(capsule.get())))
                             .c_str());
  }
  Tensor tensor = import_capsule(nb::handle(capsule.get()), object);
  if (!pass_stream) {
    // Asked without a stream for a device that takes none: a tensor of one that does was never
    // ordered for the consumer, which would read before the producer's work is done.
    if (producer_takes_stream(tensor.device().device_type)) {
      throw nb::buffer_error(
          ("__dlpack__ gave a tensor of device type " +
           std::to_string(tensor.device().device_type) + " where __dlpack_device__() reported " +
           std::to_string(reported_type) +
           ", so its work was not ordered for the consumer's stream; the tensor is let go")
              .c_str());
    }
    return tensor;
  }
  if (!legacy_call) {
    record_import_readiness(tensor, consumer);
    return tensor;
  }
  // Without a stream the producer ordered its work before the legacy default stream: that is
  // the readiness point, and a consumer on another stream waits for it.
  if (consumer.kind == ProtocolStream::Kind::kNoSync) {
    return tensor;
  }
  record_import_readiness(tensor, ProtocolStream{});
  if (consumer.handle != kLegacyStream && tensor.has_readiness_stream_contract()) {
    if (auto ordered = order_protocol_consumer(tensor, consumer.handle); !ordered) {
      raise_error(ordered.error());
    }
  }
  return tensor;
}

}  // namespace holoscan::python
