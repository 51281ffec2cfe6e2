#pragma once
// Tensor.__dlpack__ as a plain CPython method, for the cost of a handoff.
#include <nanobind/nanobind.h>

#include <holoscan/tensor.hpp>

namespace holoscan::python {

/**
 * @brief Installs `Tensor.__dlpack__` (export_dlpack, keyword-only stream, max_version,
 *        dl_device and copy) as a METH_FASTCALL | METH_KEYWORDS method of `type`. Consumers call
 *        it once per handoff with keywords, which nanobind's general dispatcher matches by name
 *        (about a third of the call's cost); here the four names are matched by identity with
 *        interned strings first.
 */
void bind_dlpack_method(nanobind::class_<Tensor>& type);

}  // namespace holoscan::python
