#pragma once
// Device tensors for the UCX GPU tests, used by both processes: the sender's producer kernel
// spins before it writes (send() is called at once, so a send before readiness carries stale
// memory), and its pool has three blocks (so a block reused before UCX is done is overwritten
// by the next slow producer); the receiver checks every element on the GPU, twice, a delay
// apart, holding its block until the check ran.
#include <cstdint>
#include <string>

#include "holoscan/ucx.hpp"

namespace holoscan::test {

/** @brief Blocks in each side's device pool. */
inline constexpr std::size_t kDeviceSeriesBlocks = 3;

/** @brief What the sending side saw. */
struct DeviceSendReport {
  std::uint64_t delivered = 0;  ///< Sends reported delivered.
  std::uint64_t failed = 0;     ///< Sends reported failed.
  std::string error;            ///< The first failure (or why sending stopped).
};

/** @brief What the receiving side saw. */
struct DeviceReceiveReport {
  std::uint64_t received = 0;    ///< Tensors received and checked.
  std::uint64_t mismatches = 0;  ///< Elements that differed from their pattern, over all checks.
  std::uint64_t wrong_sums = 0;  ///< Tensors whose checksum was not their pattern's.
  std::string error;             ///< Why receiving stopped early.
};

/** @brief A configuration whose receive_pool holds device tensors of `elements` uint32. */
ucx::WorkerConfig device_receiving_config(std::int64_t elements);

/** @brief Sends `count` device tensors of `elements` uint32, tensor k with pattern seed k + 1,
 *         each written by a producer that spins `delay_us` first, then waits for every result. */
DeviceSendReport send_device_series(ucx::Worker& worker, ucx::PeerId peer, std::uint64_t count,
                                    std::int64_t elements, std::uint64_t delay_us);

/** @brief Receives `count` tensors and checks each on the GPU against the seed of its sequence. */
DeviceReceiveReport receive_device_series(ucx::Worker& worker, std::uint64_t count,
                                          std::int64_t elements);

}  // namespace holoscan::test
