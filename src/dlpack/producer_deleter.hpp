#pragma once
// Runs a DLPack producer's deleter so that an exception thrown through it cannot end the process;
// the Python extension's release path runs deleters through it too. Every release that fails
// (these deleters, the release functions of make_tensor and wrap_memory) is reported the same
// way, here.
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

/**
 * @brief run_producer_deleter(), except that a forced unwinding (a thread ended by pthread_exit
 *        inside the deleter: CPython ends a daemon thread so when it takes the GIL back during
 *        finalization) goes on through it. Contained like any exception, it aborts the process;
 *        the caller must stop it where nothing is unwound (the Python package parks the thread).
 */
HOLOSCAN_DLPACK_WING_API void run_producer_deleter_letting_threads_end(
    DLManagedTensorVersioned* managed);
/** @brief run_producer_deleter_letting_threads_end() for a legacy managed tensor. */
HOLOSCAN_DLPACK_WING_API void run_producer_deleter_letting_threads_end(DLManagedTensor* managed);

/**
 * @brief Counts a release that failed in failed_releases() and reports it on stderr, one line
 *        each for the first 16: "holoscan-dlpack: <failure>: <why>; contained, ...". Allocates
 *        nothing (it runs where the heap may be what failed).
 */
HOLOSCAN_DLPACK_WING_API void report_failed_release(const char* failure, const char* why) noexcept;

/**
 * @brief A release called again, which nothing is left to do: counted and reported as
 *        report_failed_release() does, ending in "; ignored" (nothing leaks).
 */
HOLOSCAN_DLPACK_WING_API void report_ignored_release(const char* failure, const char* why) noexcept;

/**
 * @brief Called from a catch block: reports the exception in flight (its what(), when it is a
 *        std::exception) through report_failed_release(`failure`, ...).
 */
HOLOSCAN_DLPACK_WING_API void report_release_exception(const char* failure) noexcept;

}  // namespace holoscan::detail
