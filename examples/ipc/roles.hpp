#pragma once
// The processes of the cross-process demo and benchmark: a producer that publishes tensors from a
// shareable pool, consumers that check each one on the GPU, and a relay that transforms what it
// imports into tensors of its own pool and publishes those on.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <holoscan/cuda_handles.hpp>
#include <holoscan/ipc.hpp>
#include <holoscan/tensor_pool.hpp>

#include "ipc/stage_trace.hpp"

namespace ipc_demo {

/** @brief Tensors before the clock starts: contexts, mappings, events. */
inline constexpr long kWarmUpTensors = 100;

/** @brief What every process of one run agrees on. */
struct RunShape {
  long count = 10000;               ///< Tensors produced.
  std::int64_t elements = 1 << 14;  ///< uint32 elements per tensor.
  std::size_t blocks = 8;           ///< Blocks of each process's pool.
  std::uint64_t delay_us = 0;       ///< The producer kernel's spin before it writes.
  bool spin = false;                ///< Importers poll receive(0) instead of sleeping in it.
  /// Where the importers wait for readiness (kOnHost: no stream waits on another process).
  holoscan::ipc::ReadinessWait readiness = holoscan::ipc::ReadinessWait::kOnHost;
  std::string trace;                ///< Stage stamps go to files with this prefix (empty: none).
};

/** @brief A shareable device pool of `shape.blocks` blocks of `shape.elements` uint32. */
holoscan::expected<std::shared_ptr<holoscan::TensorPool>, holoscan::Error> make_pool(
    const RunShape& shape);

/**
 * @brief Publishes tensors `first` to `end` - 1, tensor i holding pattern(i), to every peer; with
 *        `one_at_a_time`, waits for each peer's Release before the next (a round trip). Returns
 *        false on the first failure, which it prints. Stamps its stages in `trace` (if given):
 *        start, allocated, ready, published, released.
 */
bool produce(holoscan::ipc::Exporter& exporter, const std::vector<holoscan::ipc::PeerId>& peers,
             holoscan::TensorPool& pool, cudaStream_t stream, const RunShape& shape, long first,
             long end, bool one_at_a_time, StageTrace* trace = nullptr);

/** @brief Polls `exporter` until it holds no claim (or 60 s pass); false on timeout. */
bool drain(holoscan::ipc::Exporter& exporter);

/**
 * @brief The consumer process: imports `shape.count` tensors from `channel_fd`, checks each on
 *        the GPU against pattern(i) + `offset`, and prints what it saw. Exit status: 0 when
 *        every element matched and no host block happened on the hot path. With
 *        `shape.trace`, stamps each tensor as received, consumed and dropped. Once the checks
 *        have completed on the GPU, writes that moment to `done_fd` (if not -1; FinishStamps).
 */
int consume(int channel_fd, const RunShape& shape, std::uint32_t offset, int done_fd = -1);

/**
 * @brief The relay process: imports from `in_fd`, adds one to each tensor into a block of its own
 *        shareable pool and publishes that to the process at `out_fd`.
 */
int relay(int in_fd, int out_fd, const RunShape& shape);

}  // namespace ipc_demo
