#pragma once
// Interprocess events (cudaEventInterprocess | cudaEventDisableTiming), pooled per device with
// their IPC handles, apart from the library's ordinary event pool: an exporter's readiness event
// goes back here only once the importer has released the export (until then the importer may
// still wait on it), and the importer's release events by their connections' rings until their
// exporter's process has exited (ipc_release_stream.hpp).
#include <array>
#include <cstddef>
#include <cstdint>

#include "holoscan/expected.hpp"
#include "holoscan/export.hpp"
#include "holoscan/ipc/descriptor.hpp"
#include "ipc/cuda/cuda_ipc_api.hpp"

namespace holoscan::detail {

/** @brief An interprocess event of `device` and its cudaIpcEventHandle_t. */
struct HOLOSCAN_DLPACK_ABI IpcEvent {
  cudaEvent_t event = nullptr;                              ///< Through cuda_ipc() only.
  int device = -1;                                          ///< Device it was created on.
  std::array<std::uint8_t, ipc::kIpcHandleBytes> handle{};  ///< Asked for once, at creation.
};

/** @brief A free interprocess event of `device`, created (with its handle) when none is free. */
expected<IpcEvent, Error> acquire_ipc_event(int device) noexcept;

/**
 * @brief Gives `event` back to its device's pool; never allocates.
 *
 * Never destroyed while the process lives: a peer caches the event it opened by handle bytes
 * (OpenedEventCache), and a destroyed event's handle could come back naming a new one.
 */
void release_ipc_event(const IpcEvent& event) noexcept;

/**
 * @brief Destroys every free interprocess event through the table in use and forgets it.
 *
 * For tests that swap the CUDA tables. Returns how many events are still held (not yet released).
 */
HOLOSCAN_DLPACK_ABI std::size_t destroy_free_ipc_events() noexcept;

}  // namespace holoscan::detail
