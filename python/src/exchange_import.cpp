#include <Python.h>

#include <array>
#include <optional>
#include <utility>

#include "devices.hpp"
#include "errors.hpp"
#include "imports.hpp"
#include "protocol_streams.hpp"
#include "without_gil.hpp"

namespace nb = nanobind;

namespace holoscan::python {

#if DLPACK_MAJOR_VERSION == 1 && DLPACK_MINOR_VERSION >= 3

namespace {

// The table's layout is that of DLPack 1.3, the first header this build knows it from.
constexpr std::uint32_t kExchangeMinor = 3;

const DLPackExchangeAPI* api_of(PyTypeObject* type) {
  // A metaclass's __getattr__ or property is Python code, run by this thread: see running_python.
  PyObject* capsule = running_python([&] {
    return PyObject_GetAttrString(reinterpret_cast<PyObject*>(type), "__dlpack_c_exchange_api__");
  });
  if (capsule == nullptr) {
    // No table (AttributeError); anything else the lookup raised (KeyboardInterrupt, a
    // metaclass's own error) is the caller's to see.
    if (PyErr_ExceptionMatches(PyExc_AttributeError) == 0) {
      throw nb::python_error();
    }
    PyErr_Clear();
    return nullptr;
  }
  const auto* api = static_cast<const DLPackExchangeAPI*>(
      PyCapsule_IsValid(capsule, "dlpack_exchange_api") != 0
          ? PyCapsule_GetPointer(capsule, "dlpack_exchange_api")
          : nullptr);
  // The table itself lives as long as the process (DLPack's rule). A metaclass's property may
  // have answered with a fresh object whose __del__ is Python code: see running_python.
  running_python([&] {
    Py_DECREF(capsule);
    return 0;
  });
  if (api == nullptr || api->header.version.major != DLPACK_MAJOR_VERSION ||
      api->header.version.minor < kExchangeMinor ||
      api->managed_tensor_from_py_object_no_sync == nullptr ||
      api->current_work_stream == nullptr) {
    return nullptr;
  }
  return api;
}

// A failed table call raises the Python error that DLPack asks it to set, else `message`
// (nanobind's python_error aborts the process when no error is set).
[[noreturn]] void raise_table_failure(const char* message) {
  if (PyErr_Occurred() == nullptr) {
    throw nb::buffer_error(message);
  }
  throw nb::python_error();
}

// Whether `weak`, a weak reference to a type, still refers to it.
bool weakly_alive(PyObject* weak) noexcept {
#if PY_VERSION_HEX >= 0x030D0000
  PyObject* object = nullptr;
  if (PyWeakref_GetRef(weak, &object) < 0) {
    PyErr_Clear();
    return false;
  }
  Py_XDECREF(object);  // only its liveness is asked: the cache never hands the object out
  return object != nullptr;
#else
  return PyWeakref_GetObject(weak) != Py_None;  // borrowed, None once the type died
#endif
}

// The type's version tag, 0 where it has no valid one. CPython gives a type a new tag after any
// change to it or a base; before 3.10 a change only cleared Py_TPFLAGS_VALID_VERSION_TAG and left
// the old number in place. A change to the metaclass (an attribute or a __getattr__ there) does
// not change the class's tag: such a class keeps the table it was first looked up with.
unsigned int version_tag(PyTypeObject* type) noexcept {
#if PY_VERSION_HEX < 0x030A0000
  if (!PyType_HasFeature(type, Py_TPFLAGS_VALID_VERSION_TAG)) {
    return 0;
  }
#endif
  return type->tp_version_tag;
}

// Looked up once per type and version of it (the GIL guards the cache): a class given the
// attribute, or losing it, after its first import is looked up again, as CPython's own attribute
// cache does (see version_tag; a type without a tag is not cached). The cache must not keep a
// type alive: a
// class (with its attributes and, through its methods, its module's globals) would live as long
// as the process. A heap type is held by a weak reference, so that its slot is taken back once it
// died and its address cannot come back as another type's; a static type lives as long as its
// module's code and is kept by address.
const DLPackExchangeAPI* cached_api(PyTypeObject* type) {
  struct Entry {
    PyTypeObject* type = nullptr;
    PyObject* weak = nullptr;  // a weak reference to a heap type, else null
    const DLPackExchangeAPI* api = nullptr;
    unsigned int version = 0;  // the type's tp_version_tag when it was looked up (never 0)
  };
  static std::array<Entry, 8> cache{};
  const auto forget = [](Entry& entry) noexcept {
    Py_CLEAR(entry.weak);
    entry = Entry{};
  };
  for (Entry& entry : cache) {
    if (entry.type == nullptr) {
      continue;
    }
    if (entry.weak != nullptr && !weakly_alive(entry.weak)) {
      forget(entry);  // that type died: the slot is free, whatever type has its address now
      continue;
    }
    if (entry.type == type) {
      if (entry.version == version_tag(type)) {
        return entry.api;
      }
      forget(entry);  // the type changed since: looked up again below
    }
  }
  // Read before the lookup, which may run Python code that changes the type: a change then
  // shows as another tag next time. A tag the lookup itself assigns is cached next time.
  const unsigned int version = version_tag(type);
  const DLPackExchangeAPI* api = api_of(type);
  if (version == 0) {
    return api;
  }
  PyObject* weak = nullptr;
  if ((type->tp_flags & Py_TPFLAGS_HEAPTYPE) != 0) {
    weak = PyWeakref_NewRef(reinterpret_cast<PyObject*>(type), nullptr);
    if (weak == nullptr) {
      PyErr_Clear();  // not cached: looked up again next time
      return api;
    }
  }
  for (Entry& entry : cache) {
    if (entry.type == nullptr) {
      entry = Entry{type, weak, api, version};
      return api;
    }
  }
  Py_XDECREF(weak);  // the cache is full: looked up again next time
  return api;
}

}  // namespace

std::optional<Tensor> import_through_exchange_api(nb::handle object,
                                                  const ProtocolStream& consumer) {
  const DLPackExchangeAPI* api = cached_api(Py_TYPE(object.ptr()));
  if (api == nullptr) {
    return std::nullopt;
  }
  DLManagedTensorVersioned* managed = nullptr;
  // Holoscan 5.0's sentences first, then which call it was.
  if (api->managed_tensor_from_py_object_no_sync(object.ptr(), &managed) != 0) {
    raise_table_failure(
        "DLPack C exchange managed export failed: __dlpack_c_exchange_api__ gave no tensor");
  }
  if (managed == nullptr) {
    raise_table_failure(
        "DLPack C exchange managed export returned null: __dlpack_c_exchange_api__ gave no tensor");
  }
  // Unlike a capsule, nothing else owns `managed` now: a rejection is ours to free.
  if (managed->version.major != HOLOSCAN_DLPACK_IMPL_VERSION_MAJOR) {
    free_with_producer_deleter(managed);
    throw nb::buffer_error("__dlpack_c_exchange_api__ gave another DLPack major version");
  }
  auto tensor = adopt_versioned(managed, object);
  if (!tensor) {
    free_with_producer_deleter(managed);
    raise_error(tensor.error(), Raise::kBuffer);
  }
  const DLDevice device = tensor->device();
  if (consumer.kind == ProtocolStream::Kind::kNoSync || !cuda_ordered(device.device_type)) {
    return std::move(*tensor);
  }
  // The producer's own work stream is where its data becomes ready: record it there, and have
  // the consumer wait (nothing when both are the legacy default stream).
  void* work = nullptr;
  if (api->current_work_stream(static_cast<DLDeviceType>(device.device_type), device.device_id,
                               &work) != 0) {
    raise_table_failure(
        "DLPack C exchange current stream query failed: __dlpack_c_exchange_api__ gave no work "
        "stream");
  }
  // A null work stream is the producer's legacy default stream (torch's default stream) of the
  // tensor's device: recorded as cudaStreamLegacy, which names the same stream and lets legacy
  // consumers skip the wait.
  cudaStream_t producer_stream = work != nullptr ? static_cast<cudaStream_t>(work) : kLegacyStream;
  const bool same_stream = producer_stream == consumer.handle ||
                           ready_on_legacy_default(producer_stream, consumer.handle);
  {
    const holoscan::detail::DefaultStreamDevice scope(tensor->device(), producer_stream);
    if (!tensor->set_readiness_stream(producer_stream) && !same_stream) {
      // The producer ordered nothing for the consumer (no_sync): without a point the consumer
      // could read before the data is written.
      throw nb::buffer_error(
          "__dlpack_c_exchange_api__: no readiness point could be recorded on the producer's work "
          "stream (is it capturing a CUDA graph?), so the consumer's stream cannot be ordered "
          "after its work");
    }
  }
  if (!same_stream) {
    if (auto ordered = order_protocol_consumer(*tensor, consumer.handle); !ordered) {
      raise_error(ordered.error());
    }
  }
  return std::move(*tensor);
}

#else

std::optional<Tensor> import_through_exchange_api(nb::handle, const ProtocolStream&) {
  return std::nullopt;  // built against a dlpack.h without the C exchange API
}

#endif

}  // namespace holoscan::python
