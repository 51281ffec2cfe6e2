#pragma once
// The importer's side of a release, all on the GPU: one internal stream per device waits on every
// deallocation point of an import, then records an interprocess event that the exporter polls.
//
// Each device's release events form a ring recorded on that one stream. An exporter may still be
// polling an event when the ring comes round and records it again; that later point is further
// down the same stream, so it completes only after the one the exporter waits for: the exporter
// then waits a little longer, never less. That is why the events need no word back from the
// exporter before they are reused, and why all releases of a device share one stream.
#include <array>
#include <cstddef>
#include <cstdint>

#include "holoscan/expected.hpp"
#include "holoscan/export.hpp"
#include "holoscan/ipc/descriptor.hpp"
#include "stream/stream_point_list.hpp"

namespace holoscan::detail {

/** @brief Interprocess events per device in the ring (a bound on the events an exporter opens). */
inline constexpr std::size_t kReleaseRingSize = 64;

/**
 * @brief Orders `device`'s release stream after every point in `points` and records a release
 *        event there; returns its cudaIpcEventHandle_t bytes. Never blocks on the GPU.
 */
expected<std::array<std::uint8_t, ipc::kIpcHandleBytes>, Error> record_release(
    int device, const StreamPointList& points) noexcept;

/**
 * @brief Destroys the release streams and gives their events back to the interprocess pool,
 *        through the tables in use. For tests that swap the CUDA tables.
 */
HOLOSCAN_DLPACK_ABI void reset_release_streams() noexcept;

}  // namespace holoscan::detail
