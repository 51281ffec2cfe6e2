#pragma once
// The stream owner lookup of copy exports, bound for the tests (see stream_owner_probe.cpp).
#include <nanobind/nanobind.h>

namespace holoscan::python::testing {

/** @brief Adds find_stream_owner(handle) to `module`. */
void bind_stream_owner(nanobind::module_& module);

}  // namespace holoscan::python::testing
