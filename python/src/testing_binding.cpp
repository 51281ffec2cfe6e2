// holoscan_dlpack._core._testing: a counting DLPack producer and probes that drop Tensors on
// threads Python does not know, as the library's release thread does. For the test suite only.
#include <nanobind/nanobind.h>
#include <nanobind/stl/vector.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include <holoscan/tensor.hpp>

#include "bindings.hpp"
#include "python_release.hpp"
#include "testing_producer.hpp"

namespace nb = nanobind;

namespace holoscan::python {
namespace {

nb::object make_capsule(unsigned major, unsigned minor, bool versioned, std::uint64_t flags,
                        const std::vector<std::int64_t>& shape, nb::tuple dtype, nb::tuple device,
                        bool gil_deleter, bool null_data) {
  testing::ProducerSpec spec;
  spec.version = DLPackVersion{major, minor};
  spec.flags = flags;
  spec.shape = shape;
  spec.dtype = DLDataType{nb::cast<std::uint8_t>(dtype[0]), nb::cast<std::uint8_t>(dtype[1]),
                          nb::cast<std::uint16_t>(dtype[2])};
  spec.device = DLDevice{static_cast<DLDeviceType>(nb::cast<int>(device[0])),
                         nb::cast<std::int32_t>(device[1])};
  spec.gil_deleter = gil_deleter;
  spec.null_data = null_data;
  PyObject* capsule = nullptr;
  if (versioned) {
    DLManagedTensorVersioned* managed = testing::make_versioned(spec);
    capsule = PyCapsule_New(managed, "dltensor_versioned", &testing::capsule_destructor);
    if (capsule == nullptr) {
      managed->deleter(managed);
    }
  } else {
    DLManagedTensor* managed = testing::make_legacy(spec);
    capsule = PyCapsule_New(managed, "dltensor", &testing::capsule_destructor);
    if (capsule == nullptr) {
      managed->deleter(managed);
    }
  }
  if (capsule == nullptr) {
    throw nb::python_error();
  }
  return nb::steal(capsule);
}

std::mutex g_held_mutex;
std::vector<Tensor>& held() {
  static auto* tensors = new std::vector<Tensor>();
  return *tensors;
}

std::vector<Tensor> take_held() {
  std::lock_guard<std::mutex> lock(g_held_mutex);
  return std::exchange(held(), {});
}

// Drops the held Tensors on a new thread while this one keeps the GIL and waits: the library's
// release thread in the situation where a deleter that took the GIL would deadlock.
nb::tuple drop_held_on_foreign_thread(double timeout_seconds) {
  std::vector<Tensor> batch = take_held();
  std::promise<void> dropped;
  std::future<void> done = dropped.get_future();
  std::thread worker([&batch, &dropped] {
    batch.clear();
    dropped.set_value();
  });
  const bool finished =
      done.wait_for(std::chrono::duration<double>(timeout_seconds)) == std::future_status::ready;
  const std::size_t queued = queued_python_releases();
  if (finished) {
    worker.join();
  } else {
    nb::gil_scoped_release unlocked;  // let the stuck release have the GIL, then report it
    worker.join();
  }
  return nb::make_tuple(finished, queued);
}

void drop_held_later(double delay_seconds) {
  std::thread([batch = take_held(), delay_seconds]() mutable {
    std::this_thread::sleep_for(std::chrono::duration<double>(delay_seconds));
    batch.clear();
  }).detach();
}

void hold_until_exit(const Tensor& tensor) {
  static auto* tensors = new std::vector<Tensor>();
  static const bool registered = [] {
    // C atexit handlers run after Py_Finalize: these releases meet a finalized interpreter,
    // and must leak their producers (no deleter may run).
    std::atexit([] {
      const int before = testing::deleter_calls();
      tensors->clear();
      std::printf("post-finalization drop: %d producer deleter calls\n",
                  testing::deleter_calls() - before);
      std::fflush(stdout);
    });
    return true;
  }();
  (void)registered;
  tensors->push_back(tensor);
}

}  // namespace

void bind_testing(nb::module_& module) {
  nb::module_ testing = module.def_submodule(
      "_testing", "Test helpers: a counting DLPack producer and foreign-thread release probes.");
  testing.def("make_capsule", &make_capsule, nb::kw_only(), nb::arg("major") = 1,
              nb::arg("minor") = 0, nb::arg("versioned") = true, nb::arg("flags") = 0,
              nb::arg("shape") = std::vector<std::int64_t>{4},
              nb::arg("dtype") = nb::make_tuple(2, 32, 1), nb::arg("device") = nb::make_tuple(1, 0),
              nb::arg("gil_deleter") = false, nb::arg("null_data") = false,
              "A DLPack capsule over host memory whose deleter is counted.");
  testing.def("deleter_calls", &testing::deleter_calls,
              "Deleter calls of the test producers' tensors so far.");
  testing.def("last_deleter_thread", &testing::last_deleter_thread,
              "threading.get_ident() of the thread the last counted deleter ran on.");
  testing.def(
      "hold",
      [](const Tensor& tensor) {
        std::lock_guard<std::mutex> lock(g_held_mutex);
        held().push_back(tensor);
      },
      "Keeps a copy of the Tensor in C++ until a drop_held_* call.");
  testing.def("drop_held_on_foreign_thread", &drop_held_on_foreign_thread,
              nb::arg("timeout") = 10.0,
              "Drops the held Tensors on a non-Python thread while holding the GIL; returns "
              "(finished in time, Python releases queued right after).");
  testing.def("drop_held_later", &drop_held_later, nb::arg("delay"),
              "Drops the held Tensors on a detached non-Python thread after `delay` seconds.");
  testing.def("hold_until_exit", &hold_until_exit, nb::arg("tensor"),
              "Keeps a copy until a C atexit handler, after the interpreter is finalized.");
  bind_exchange_producer(testing);
  testing.def("queued_python_releases", &queued_python_releases,
              "Python releases queued for a thread that holds the GIL.");
}

}  // namespace holoscan::python
