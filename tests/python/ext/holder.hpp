#pragma once
// Last owners held in C++ and dropped on foreign threads (see holder.cpp).
#include <nanobind/nanobind.h>

#include <dlpack/dlpack.h>

namespace holoscan::python::testing {

/** @brief Binds hold, drop_held_on_foreign_thread, drop_held_later and hold_until_exit. */
void bind_holder(nanobind::module_& module);

/** @brief Holds `managed` like `hold` does, until a drop_held_* call. */
void hold_managed(DLManagedTensorVersioned* managed);

/** @brief Binds ExchangeProducer and the C exchange API consumer helpers. */
void bind_exchange(nanobind::module_& module);

}  // namespace holoscan::python::testing
