#pragma once
// Counts the host blocks the library makes: its CUDA tables are replaced by copies whose
// cudaStreamSynchronize and cudaEventSynchronize entries count, then call the real ones. The
// demo's own loops make no CUDA call that blocks, so this is every host block on the hot path.
#include <cstdint>

namespace ipc_demo {

/** @brief Installs the counting tables (once per process, before any other library call). */
void count_host_blocks() noexcept;

/** @brief Host-blocking calls the library made since count_host_blocks(). */
std::uint64_t host_blocks() noexcept;

}  // namespace ipc_demo
