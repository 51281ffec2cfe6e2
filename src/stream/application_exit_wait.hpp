#pragma once
// What an application's own exit drain (the Python package's atexit hook) tells the library's:
// a header without CUDA's, for callers built without the CUDA toolkit's include path.
#include <chrono>

#include "wing_api.hpp"

namespace holoscan::detail {

/**
 * @brief Counts `waited` against the library's exit drain: time an application's own drain
 *        spent waiting for releases before the library's exit handler (ReleaseQueue's
 *        application_exit_wait, which says how the two share the limit).
 */
HOLOSCAN_DLPACK_WING_API void application_exit_wait(
    std::chrono::steady_clock::duration waited) noexcept;

}  // namespace holoscan::detail
