// _testing.ExchangeProducer: a producer type that publishes DLPack 1.3's C exchange API, counting
// what the consumer asks of it, so that the fast import path is tested without torch.
#include <nanobind/nanobind.h>
#include <nanobind/stl/vector.h>

#include <atomic>
#include <cstdint>
#include <vector>

#include "bindings.hpp"
#include "testing_producer.hpp"

namespace nb = nanobind;

namespace holoscan::python {
namespace {

struct ExchangeProducer {
  testing::ProducerSpec spec;
  int dlpack_calls = 0;
};

std::atomic<int> g_exchange_calls{0};
std::atomic<int> g_stream_queries{0};
std::atomic<std::uintptr_t> g_work_stream{0};

#if DLPACK_MAJOR_VERSION == 1 && DLPACK_MINOR_VERSION >= 3

int from_py_object(void* py_object, DLManagedTensorVersioned** out) {
  g_exchange_calls.fetch_add(1);
  const auto* producer =
      nb::inst_ptr<ExchangeProducer>(nb::handle(static_cast<PyObject*>(py_object)));
  *out = testing::make_versioned(producer->spec);
  return 0;
}

int current_work_stream(DLDeviceType, std::int32_t, void** out) {
  g_stream_queries.fetch_add(1);
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

#endif

}  // namespace

void bind_exchange_producer(nb::module_& testing) {
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
            DLManagedTensorVersioned* managed = testing::make_versioned(self.spec);
            PyObject* capsule =
                PyCapsule_New(managed, "dltensor_versioned", &testing::capsule_destructor);
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
#endif
  testing.def(
      "exchange_counts",
      [] { return nb::make_tuple(g_exchange_calls.load(), g_stream_queries.load()); },
      "(C exchange imports, current_work_stream queries) so far.");
  testing.def(
      "set_work_stream", [](std::uintptr_t stream) { g_work_stream.store(stream); },
      "What the test producer's current_work_stream reports.");
}

}  // namespace holoscan::python
