#pragma once
// Element types between Python spellings and DLDataType.
#include <nanobind/nanobind.h>

#include <string>

#include <dlpack/dlpack.h>

namespace holoscan::python {

/**
 * @brief The NumPy type string of `dtype` ("<f4"), or for types NumPy cannot describe the DLPack
 *        name ("bfloat16", "float8_e4m3fn", with "x4" for 4 lanes).
 */
std::string dtype_string(DLDataType dtype);

/**
 * @brief A DLDataType from a DLDataType, a NumPy type string ("<f4"), a name ("float32",
 *        "bfloat16"), a `numpy.dtype` (its `str`), or a (code, bits, lanes) tuple;
 *        InvalidArgumentError or TypeError else.
 */
DLDataType parse_dtype(nanobind::handle dtype);

}  // namespace holoscan::python
