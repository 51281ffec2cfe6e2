#include "producer.hpp"

#include <Python.h>
#include <pthread.h>

#include <atomic>
#include <stdexcept>

namespace holoscan::python::testing {
namespace {

std::atomic<int> g_deleter_calls{0};
std::atomic<unsigned long> g_last_deleter_thread{0};

// One record per tensor: the managed tensor (either layout), its shape and its data.
struct Record {
  DLManagedTensorVersioned versioned{};
  DLManagedTensor legacy{};
  std::vector<std::int64_t> shape;
  std::vector<std::uint8_t> bytes;
  bool gil_deleter = false;

  void count_and_free() noexcept {
    g_last_deleter_thread.store(static_cast<unsigned long>(pthread_self()));
    if (gil_deleter) {
      // As NumPy's and CuPy's deleters do: a deadlock if called where the GIL cannot be had.
      PyGILState_STATE state = PyGILState_Ensure();
      Py_XDECREF(PyLong_FromLong(1 << 20));
      PyGILState_Release(state);
    }
    g_deleter_calls.fetch_add(1);
    delete this;
  }
  static void delete_versioned(DLManagedTensorVersioned* self) noexcept {
    static_cast<Record*>(self->manager_ctx)->count_and_free();
  }
  static void delete_legacy(DLManagedTensor* self) noexcept {
    static_cast<Record*>(self->manager_ctx)->count_and_free();
  }
  // DLPack deleters are C function pointers, but nothing stops a C++ producer from throwing.
  static void delete_and_throw(DLManagedTensorVersioned* self) {
    delete_versioned(self);
    throw std::runtime_error("the test producer's deleter throws");
  }
};

Record* make_record(const ProducerSpec& spec, DLTensor& tensor) {
  auto* record = new Record();
  record->shape = spec.shape;
  record->gil_deleter = spec.gil_deleter;
  tensor.dtype = spec.dtype;
  tensor.device = spec.device;
  tensor.ndim = static_cast<std::int32_t>(spec.shape.size());
  tensor.shape = record->shape.empty() ? nullptr : record->shape.data();
  std::size_t count = 1;
  for (std::int64_t extent : spec.shape) {
    count *= extent > 0 ? static_cast<std::size_t>(extent) : 0;
  }
  if (spec.address != 0) {
    tensor.data = reinterpret_cast<void*>(spec.address);
    return record;
  }
  record->bytes.assign(
      spec.byte_offset + count * ((spec.dtype.bits * spec.dtype.lanes + 7u) / 8u) + 1, 0);
  tensor.data = spec.null_data ? nullptr : record->bytes.data();
  tensor.byte_offset = spec.byte_offset;
  return record;
}

}  // namespace

DLManagedTensorVersioned* make_versioned(const ProducerSpec& spec) {
  DLTensor tensor{};
  Record* record = make_record(spec, tensor);
  record->versioned.version = spec.version;
  record->versioned.flags = spec.flags;
  record->versioned.dl_tensor = tensor;
  record->versioned.manager_ctx = record;
  record->versioned.deleter =
      spec.throwing_deleter ? &Record::delete_and_throw : &Record::delete_versioned;
  return &record->versioned;
}

DLManagedTensor* make_legacy(const ProducerSpec& spec) {
  DLTensor tensor{};
  Record* record = make_record(spec, tensor);
  record->legacy.dl_tensor = tensor;
  record->legacy.manager_ctx = record;
  record->legacy.deleter = &Record::delete_legacy;
  return &record->legacy;
}

void capsule_destructor(PyObject* capsule) noexcept {
  if (PyCapsule_IsValid(capsule, "dltensor_versioned") != 0) {
    auto* managed =
        static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(capsule, "dltensor_versioned"));
    managed->deleter(managed);
  } else if (PyCapsule_IsValid(capsule, "dltensor") != 0) {
    auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
    managed->deleter(managed);
  }
}

int deleter_calls() noexcept { return g_deleter_calls.load(); }

unsigned long last_deleter_thread() noexcept { return g_last_deleter_thread.load(); }

}  // namespace holoscan::python::testing
