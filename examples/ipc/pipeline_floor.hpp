#pragma once
// The floor of the cross-process pipeline (producer -> relay -> sink, `blocks` tensors in flight
// per hop, 1 to 64), done by hand: per tensor and hop a socket record each way of the library's
// frame sizes (a Publish, with a descriptor attached when fd=1; a Release), an interprocess event
// per block and direction, recorded once and waited for once (by the stream, or from the host
// with FloorOptions::host_wait), and the same kernels as the library's run (fill, add one, check).
// Each side's blocks are mapped once, and the sink checks every value as the library's does; no
// validation, no claims, no pool. Without MPS the three processes take turns on the GPU, and this
// floor pays those turns as the library does.
#include <string>

#include "ipc/floor.hpp"
#include "ipc/roles.hpp"

namespace ipc_demo {

/**
 * @brief The producer: starts the relay and the sink (`self` with role=floor_relay and
 *        role=floor_sink), produces `shape.count` tensors (the first kWarmUpTensors untimed) and
 *        prints a RESULT line (tensors_per_s, to the sink's last check) as the pipeline mode does.
 *        Exit status 0 on success.
 */
int run_pipeline_floor(const std::string& self, const RunShape& shape, const FloorOptions& options);

/** @brief The relay (role=floor_relay): takes each tensor on `in_fd`, passes one on to `out_fd`. */
int pipeline_floor_relay(int in_fd, int out_fd, const RunShape& shape, const FloorOptions& options);

/**
 * @brief The sink (role=floor_sink): takes each tensor on `in_fd`, checks it on the GPU, and once
 *        the last check completed writes that moment to `done_fd` (FinishStamps).
 */
int pipeline_floor_sink(int in_fd, int done_fd, const RunShape& shape, const FloorOptions& options);

}  // namespace ipc_demo
