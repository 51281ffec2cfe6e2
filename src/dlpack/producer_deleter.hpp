#pragma once
// Runs a DLPack producer's deleter so that an exception thrown through it cannot end the process;
// the Python extension's release path runs deleters through it too.
#include <dlpack/dlpack.h>

#include "wing_api.hpp"

namespace holoscan::detail {

/**
 * @brief Calls `managed->deleter(managed)`. A C++ producer can throw through that C function
 *        pointer: the exception is contained (never rethrown), reported on stderr and counted in
 *        failed_releases(); the deleter counts as run and is never called again.
 */
HOLOSCAN_DLPACK_WING_API void run_producer_deleter(DLManagedTensorVersioned* managed) noexcept;
/** @brief run_producer_deleter() for a legacy managed tensor. */
HOLOSCAN_DLPACK_WING_API void run_producer_deleter(DLManagedTensor* managed) noexcept;

}  // namespace holoscan::detail
