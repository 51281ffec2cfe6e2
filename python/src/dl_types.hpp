#pragma once
// DLPack's device and element type as Python sees them (Holoscan 5.0's holoscan.tensor names).
#include <nanobind/nanobind.h>

#include <string>

#include <dlpack/dlpack.h>

#include "cast_arg.hpp"

namespace holoscan::python {

/** @brief Python's DLDeviceType: any int32 value, the known ones named. */
enum class DeviceTypeCode : int {};
/** @brief Python's DLDataTypeCode: any 8-bit value, the known ones named. */
enum class TypeCode : int {};

/** @brief Whether DLDeviceType names `value` (else Python gets a plain int). */
bool known_device_type(int value) noexcept;
/** @brief DLDeviceType's name for `value` ("DLCUDA"), or null for a value it lacks. */
const char* device_type_name(int value) noexcept;
/** @brief DLDataTypeCode's name for `value` ("DLFLOAT"), or null for a value it lacks. */
const char* type_code_name(int value) noexcept;

/** @brief `device_type` as a DLDeviceType member, or a plain int for a value it lacks. */
nanobind::object device_type_object(int value);

/** @brief "DLDevice(device_type=kDLCUDA, device_id=0)", as Holoscan 5.0 writes it. */
std::string device_repr(DLDevice device);

/** @brief "DLDataType(code=DLFLOAT, bits=32, lanes=1)", as Holoscan 5.0 writes it. */
std::string dtype_repr(DLDataType dtype);

/**
 * @brief A DLDevice from a DLDevice object or a (device_type, device_id) pair; TypeError else.
 *        `what` names the argument in the message; `bools` says whether True and False are
 *        integers in the pair (5.0's dl_device takes them, as its caster does; copy_to does not).
 */
DLDevice parse_device(nanobind::handle device, const char* what, Bools bools);

}  // namespace holoscan::python
