// DLPack 1.3's C exchange API from both sides, without torch: ExchangeProducer publishes a table
// and counts what the consumer asks of it (the fast import path), and the exchange_* functions
// are a C consumer of another type's table (Tensor's own, the export path).
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "holder.hpp"
#include "producer.hpp"

namespace nb = nanobind;

namespace holoscan::python::testing {
namespace {

struct ExchangeProducer {
  ProducerSpec spec;
  int dlpack_calls = 0;
};

std::atomic<int> g_exchange_calls{0};
std::atomic<int> g_stream_queries{0};
std::atomic<std::uintptr_t> g_work_stream{0};
// The table call that fails (set_exchange_failure): 0 none, 1 the converter, 2 the work stream;
// and whether it sets a Python error, as DLPack asks of a failing call.
std::atomic<int> g_failing_call{0};
std::atomic<bool> g_failure_sets_error{true};

#if DLPACK_MAJOR_VERSION == 1 && DLPACK_MINOR_VERSION >= 3

bool fails(int call) {
  if (g_failing_call.load() != call) {
    return false;
  }
  if (g_failure_sets_error.load()) {
    PyErr_SetString(PyExc_ValueError, "the test producer's table call fails");
  }
  return true;
}

int from_py_object(void* py_object, DLManagedTensorVersioned** out) {
  g_exchange_calls.fetch_add(1);
  if (fails(1)) {
    return -1;
  }
  const auto* producer =
      nb::inst_ptr<ExchangeProducer>(nb::handle(static_cast<PyObject*>(py_object)));
  *out = make_versioned(producer->spec);
  return 0;
}

int current_work_stream(DLDeviceType, std::int32_t, void** out) {
  g_stream_queries.fetch_add(1);
  if (fails(2)) {
    return -1;
  }
  *out = reinterpret_cast<void*>(g_work_stream.load());
  return 0;
}

int refuse_allocation(DLTensor*, DLManagedTensorVersioned** out, void* error_ctx,
                      void (*set_error)(void*, const char*, const char*)) {
  *out = nullptr;
  set_error(error_ctx, "NotImplementedError", "the test producer allocates nothing");
  return -1;
}

int refuse_to_py_object(DLManagedTensorVersioned*, void**) {
  PyErr_SetString(PyExc_NotImplementedError, "the test producer imports nothing");
  return -1;
}

const DLPackExchangeAPI* exchange_api() {
  static const DLPackExchangeAPI api = [] {
    DLPackExchangeAPI table{};
    table.header.version = DLPackVersion{DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
    table.managed_tensor_allocator = &refuse_allocation;
    table.managed_tensor_from_py_object_no_sync = &from_py_object;
    table.managed_tensor_to_py_object_no_sync = &refuse_to_py_object;
    table.current_work_stream = &current_work_stream;
    return table;
  }();
  return &api;
}

// --- A C consumer of another type's table (the export side of holoscan_dlpack.Tensor) ---

const DLPackExchangeAPI* table_of(nb::handle type) {
  nb::object capsule = type.attr("__dlpack_c_exchange_api__");
  const auto* api = static_cast<const DLPackExchangeAPI*>(
      PyCapsule_GetPointer(capsule.ptr(), "dlpack_exchange_api"));
  if (api == nullptr) {
    throw nb::python_error();
  }
  return api;  // lives as long as the process (DLPack's rule)
}

nb::tuple ints(const std::int64_t* values, std::int32_t count) {
  nb::list items;
  for (std::int32_t i = 0; values != nullptr && i < count; ++i) {
    items.append(values[i]);
  }
  return nb::tuple(items);
}

nb::dict describe(const DLTensor& tensor) {
  nb::dict info;
  info["data"] = reinterpret_cast<std::uintptr_t>(tensor.data) + tensor.byte_offset;
  info["shape"] = ints(tensor.shape, tensor.ndim);
  info["strides"] = ints(tensor.strides, tensor.ndim);
  info["device"] =
      nb::make_tuple(static_cast<int>(tensor.device.device_type), tensor.device.device_id);
  info["dtype"] = nb::make_tuple(tensor.dtype.code, tensor.dtype.bits, tensor.dtype.lanes);
  return info;
}

// managed_tensor_from_py_object_no_sync; the export is held (hold_managed) until a drop_held_*.
nb::dict exchange_export(nb::handle object) {
  DLManagedTensorVersioned* managed = nullptr;
  if (table_of(object.type())->managed_tensor_from_py_object_no_sync(object.ptr(), &managed) != 0) {
    throw nb::python_error();
  }
  nb::dict info = describe(managed->dl_tensor);
  info["flags"] = managed->flags;
  info["version"] = nb::make_tuple(managed->version.major, managed->version.minor);
  hold_managed(managed);
  return info;
}

nb::dict exchange_view(nb::handle object) {
  DLTensor view{};
  if (table_of(object.type())->dltensor_from_py_object_no_sync(object.ptr(), &view) != 0) {
    throw nb::python_error();
  }
  return describe(view);
}

// managed_tensor_to_py_object_no_sync of a counted test tensor (another major version if asked).
nb::object exchange_to_object(nb::handle type, const std::vector<std::int64_t>& shape,
                              unsigned major) {
  ProducerSpec spec;
  spec.shape = shape;
  spec.version = DLPackVersion{major, 0};
  void* object = nullptr;
  if (table_of(type)->managed_tensor_to_py_object_no_sync(make_versioned(spec), &object) != 0) {
    throw nb::python_error();
  }
  return nb::steal(static_cast<PyObject*>(object));
}

nb::tuple exchange_allocate(nb::handle type) {
  struct Reported {
    std::string kind, message;
  } reported;
  DLTensor prototype{};
  DLManagedTensorVersioned* out = nullptr;
  const int status = table_of(type)->managed_tensor_allocator(
      &prototype, &out, &reported, [](void* context, const char* kind, const char* message) {
        *static_cast<Reported*>(context) = Reported{kind, message};
      });
  return nb::make_tuple(status, out == nullptr, reported.kind, reported.message);
}

std::uintptr_t exchange_work_stream(nb::handle type, int device_type) {
  void* stream = reinterpret_cast<void*>(std::uintptr_t{0xdead});
  if (table_of(type)->current_work_stream(static_cast<DLDeviceType>(device_type), 0, &stream) !=
      0) {
    throw nb::python_error();
  }
  return reinterpret_cast<std::uintptr_t>(stream);
}

// The message of the Python error a table call set ("" if none), which is taken.
std::string taken_error() {
  if (PyErr_Occurred() == nullptr) {
    return "";
  }
  nb::python_error error;
  return nb::cast<std::string>(nb::str(error.value()));
}

// Each of `type`'s converters given a null output pointer (a C consumer's misuse): {call:
// (status, error message)}; the tensor handed to managed_tensor_to_py_object_no_sync is counted.
nb::dict exchange_null_outputs(nb::handle type) {
  const DLPackExchangeAPI* api = table_of(type);
  nb::dict result;
  const auto record = [&](const char* call, int status) {
    result[call] = nb::make_tuple(status, taken_error());
  };
  record("managed_tensor_from_py_object_no_sync",
         api->managed_tensor_from_py_object_no_sync(nullptr, nullptr));
  record("dltensor_from_py_object_no_sync", api->dltensor_from_py_object_no_sync(nullptr, nullptr));
  DLManagedTensorVersioned* managed_out = nullptr;
  record("managed_tensor_from_py_object_no_sync, null object",
         api->managed_tensor_from_py_object_no_sync(nullptr, &managed_out));
  DLTensor view_out{};
  record("dltensor_from_py_object_no_sync, null object",
         api->dltensor_from_py_object_no_sync(nullptr, &view_out));
  ProducerSpec spec;
  record("managed_tensor_to_py_object_no_sync",
         api->managed_tensor_to_py_object_no_sync(make_versioned(spec), nullptr));
  record("current_work_stream", api->current_work_stream(kDLCUDA, 0, nullptr));
  DLTensor prototype{};
  record("managed_tensor_allocator",
         api->managed_tensor_allocator(&prototype, nullptr, nullptr, nullptr));
  return result;
}

void bind_consumer(nb::module_& testing) {
  testing.def("exchange_null_outputs", &exchange_null_outputs, nb::arg("type"),
              "Each converter of `type`'s table with a null output pointer, and the two exports "
              "of a null object: {call: (status, error message)}.");
  testing.def("exchange_export", &exchange_export, nb::arg("obj"),
              "managed_tensor_from_py_object_no_sync of obj's type; the export is held until a "
              "drop_held_* call. Returns what it describes.");
  testing.def("exchange_view", &exchange_view, nb::arg("obj"),
              "dltensor_from_py_object_no_sync of obj's type; returns what it describes.");
  testing.def("exchange_to_object", &exchange_to_object, nb::arg("type"), nb::arg("shape"),
              nb::arg("major") = 1,
              "managed_tensor_to_py_object_no_sync of `type` on a counted test tensor.");
  testing.def("exchange_allocate", &exchange_allocate, nb::arg("type"),
              "managed_tensor_allocator of `type`: (status, out is null, error kind, message).");
  testing.def("exchange_work_stream", &exchange_work_stream, nb::arg("type"),
              nb::arg("device_type"), "current_work_stream of `type` for device 0.");
}

#endif

}  // namespace

void bind_exchange(nb::module_& testing) {
  auto type = nb::class_<ExchangeProducer>(
      testing, "ExchangeProducer",
      "A producer with __dlpack_c_exchange_api__ (and __dlpack__, for copies).",
      nb::is_weak_referenceable());
  type.def(
          "__init__",
          [](ExchangeProducer* self, const std::vector<std::int64_t>& shape, int device_type) {
            new (self) ExchangeProducer();
            self->spec.shape = shape;
            self->spec.device = DLDevice{static_cast<DLDeviceType>(device_type), 0};
          },
          nb::arg("shape"), nb::arg("device_type") = 1)
      .def(
          "__dlpack_device__",
          [](const ExchangeProducer& self) {
            return nb::make_tuple(static_cast<int>(self.spec.device.device_type), 0);
          },
          "The reported device.")
      .def(
          "__dlpack__",
          [](ExchangeProducer& self, nb::kwargs) {
            ++self.dlpack_calls;
            DLManagedTensorVersioned* managed = make_versioned(self.spec);
            PyObject* capsule = PyCapsule_New(managed, "dltensor_versioned", &capsule_destructor);
            if (capsule == nullptr) {
              managed->deleter(managed);
              throw nb::python_error();
            }
            return nb::steal(capsule);
          },
          "Counted; used only when the C exchange API cannot serve.")
      .def_ro("dlpack_calls", &ExchangeProducer::dlpack_calls, "__dlpack__ calls so far.");
#if DLPACK_MAJOR_VERSION == 1 && DLPACK_MINOR_VERSION >= 3
  type.attr("__dlpack_c_exchange_api__") = nb::capsule(exchange_api(), "dlpack_exchange_api");
  bind_consumer(testing);
#endif
  testing.def(
      "exchange_counts",
      [] { return nb::make_tuple(g_exchange_calls.load(), g_stream_queries.load()); },
      "(C exchange imports, current_work_stream queries) so far.");
  testing.def(
      "set_work_stream", [](std::uintptr_t stream) { g_work_stream.store(stream); },
      "What the test producer's current_work_stream reports.");
  testing.def(
      "set_exchange_failure",
      [](const std::string& call, bool sets_error) {
        g_failing_call.store(call == "from_py_object" ? 1 : call == "current_work_stream" ? 2 : 0);
        g_failure_sets_error.store(sets_error);
      },
      nb::arg("call"), nb::arg("sets_error") = true,
      "Makes the test producer's table call `call` (\"from_py_object\", "
      "\"current_work_stream\"; anything else: none) fail, with a Python error or without.");
}

}  // namespace holoscan::python::testing
