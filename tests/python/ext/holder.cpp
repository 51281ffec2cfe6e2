// Holds the last owner of an imported tensor outside Python and drops it on threads Python does
// not know, as the library's release thread does. The owner is a versioned DLPack export of the
// Tensor (taken through `__dlpack__`, so this module links no copy of the library): calling its
// deleter drops the library's last handle, exactly as dropping a Tensor in C++ would.
#include "holder.hpp"

#include <nanobind/nanobind.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "producer.hpp"

namespace nb = nanobind;

namespace holoscan::python::testing {
namespace {

using Held = std::vector<DLManagedTensorVersioned*>;

std::mutex g_held_mutex;
Held& held() {
  static auto* exports = new Held();
  return *exports;
}

Held take_held() {
  std::lock_guard<std::mutex> lock(g_held_mutex);
  return std::exchange(held(), {});
}

void drop(Held& exports) noexcept {
  for (DLManagedTensorVersioned* managed : exports) {
    managed->deleter(managed);
  }
  exports.clear();
}

DLManagedTensorVersioned* take_export(nb::handle tensor) {
  nb::object capsule = tensor.attr("__dlpack__")(nb::arg("max_version") = nb::make_tuple(1, 0));
  auto* managed = static_cast<DLManagedTensorVersioned*>(
      PyCapsule_GetPointer(capsule.ptr(), "dltensor_versioned"));
  if (managed == nullptr || PyCapsule_SetName(capsule.ptr(), "used_dltensor_versioned") != 0) {
    throw nb::python_error();
  }
  return managed;
}

void hold(nb::handle tensor) { hold_managed(take_export(tensor)); }

// Drops the held exports on a new thread while this one keeps the GIL and waits: the library's
// release thread in the situation where a deleter that took the GIL would deadlock. What was
// released is read right after with no Python bytecode run (which could run a pending call and
// drain the queue first): the producer deleter count, and whether `watch` (a weakref) is alive.
nb::tuple drop_held_on_foreign_thread(double timeout_seconds, nb::handle watch) {
  Held batch = take_held();
  std::promise<void> dropped;
  std::future<void> done = dropped.get_future();
  std::thread worker([&batch, &dropped] {
    drop(batch);
    dropped.set_value();
  });
  const bool finished =
      done.wait_for(std::chrono::duration<double>(timeout_seconds)) == std::future_status::ready;
  const int deleted = deleter_calls();
  nb::object alive = nb::none();
  if (!watch.is_none()) {
    alive = nb::bool_(!watch().is_none());  // a weakref call runs no bytecode
  }
  if (finished) {
    worker.join();
  } else {
    nb::gil_scoped_release unlocked;  // let the stuck release have the GIL, then report it
    worker.join();
  }
  return nb::make_tuple(finished, deleted, alive);
}

void drop_held_later(double delay_seconds) {
  std::thread([batch = take_held(), delay_seconds]() mutable {
    std::this_thread::sleep_for(std::chrono::duration<double>(delay_seconds));
    drop(batch);
  }).detach();
}

void hold_until_exit(nb::handle tensor) {
  static auto* exports = new Held();
  static const bool registered = [] {
    // C atexit handlers run after Py_Finalize: these releases meet a finalized interpreter,
    // and must leak their producers (no deleter may run).
    std::atexit([] {
      const int before = deleter_calls();
      drop(*exports);
      std::printf("post-finalization drop: %d producer deleter calls\n", deleter_calls() - before);
      std::fflush(stdout);
    });
    return true;
  }();
  (void)registered;
  exports->push_back(take_export(tensor));
}

}  // namespace

void hold_managed(DLManagedTensorVersioned* managed) {
  std::lock_guard<std::mutex> lock(g_held_mutex);
  held().push_back(managed);
}

void bind_holder(nb::module_& module) {
  module.def("hold", &hold, nb::arg("tensor"),
             "Keeps a versioned export of the Tensor in C++ until a drop_held_* call.");
  module.def("drop_held_on_foreign_thread", &drop_held_on_foreign_thread, nb::arg("timeout") = 10.0,
             nb::arg("watch") = nb::none(),
             "Drops the held exports on a non-Python thread while holding the GIL; returns "
             "(finished in time, deleter_calls() right after, whether the weakref `watch` was "
             "still alive right after or None).");
  module.def("drop_held_later", &drop_held_later, nb::arg("delay"),
             "Drops the held exports on a detached non-Python thread after `delay` seconds.");
  module.def("hold_until_exit", &hold_until_exit, nb::arg("tensor"),
             "Keeps an export until a C atexit handler, after the interpreter is finalized.");
}

}  // namespace holoscan::python::testing
