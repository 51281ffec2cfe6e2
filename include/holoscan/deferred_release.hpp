#pragma once
/**
 * @file
 * @brief Control of the deleters the library defers until the GPU has passed their streams.
 *
 * Deferred releases run on one library thread. At process exit (an atexit handler) that thread
 * runs every release still pending as the GPU passes it, for at most HOLOSCAN_DLPACK_EXIT_DRAIN_MS
 * milliseconds (default 5000); past that it prints one line to stderr and leaves the rest un-run,
 * so that a deleter waiting for a lock the exiting thread holds cannot hang the exit. A deleter
 * may itself call exit(): the other pending releases still run, on a fresh thread. In a child of
 * fork() the releases inherited from the parent are never run (the parent runs them): the child
 * cannot use the parent's CUDA context, so their GPU work cannot be queried there and a deleter
 * of device memory would call into an unusable runtime; flush_deferred_releases() drops them.
 */
#include <cstddef>

#include "holoscan/detail/abi.hpp"

namespace holoscan {

/**
 * @brief Blocks until every release deferred before this call has run.
 *
 * For tests and shutdown. Returns at once when called from a deleter on the release thread. Do
 * not call it while holding a lock that a deferred deleter takes (for example a Python deleter
 * that needs the GIL while the caller holds it). The exit drain is bounded in time (see above);
 * this call is not.
 */
HOLOSCAN_DLPACK_ABI void flush_deferred_releases() noexcept;

/** @brief Releases queued and not yet run (a forked child counts the parent's until flushed). */
HOLOSCAN_DLPACK_ABI std::size_t pending_deferred_releases() noexcept;

}  // namespace holoscan
