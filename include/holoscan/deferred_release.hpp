#pragma once
/**
 * @file
 * @brief Control of the deleters the library defers until the GPU has passed their streams.
 */
#include <cstddef>

namespace holoscan {

/**
 * @brief Blocks until every release deferred before or during this call has run.
 *
 * For tests and shutdown. Do not call it while holding a lock that a deferred deleter takes
 * (for example a Python deleter that needs the GIL while the caller holds it).
 */
void flush_deferred_releases() noexcept;

/** @brief Releases queued and not yet run. */
std::size_t pending_deferred_releases() noexcept;

}  // namespace holoscan
