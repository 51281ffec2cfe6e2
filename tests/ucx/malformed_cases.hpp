#pragma once
// The malformed tensor messages a raw peer sends, each with the refusal the receiver must give,
// then well-formed ones that must still arrive on the same connection.
#include <cstdint>
#include <string>
#include <vector>

#include "holoscan/errors.hpp"
#include "holoscan/ucx/wire.hpp"

namespace holoscan::test {

/** @brief One message and what the receiver must make of it. */
struct WireCase {
  std::string name;                 ///< What is wrong with it.
  std::uint64_t sequence = 0;       ///< Its sequence number (the Ack names it).
  std::vector<std::uint8_t> header;  ///< AM header bytes.
  std::vector<std::uint8_t> data;    ///< AM data bytes.
  bool reply = true;                ///< Sent with the reply endpoint flag (else never answered).
  std::uint64_t acked_as = 0;       ///< The sequence its Ack names (0: unreadable).
  ErrorCode code = ErrorCode::kSuccess;  ///< The receiver's verdict (kSuccess: delivered).
  std::string says;                 ///< A part of the refusal's message (naming the field).
  std::uint64_t series_index = 0;   ///< For a delivered case: which tensor of the series it is.
};

/** @brief Every malformed case, then two valid tensors (small, then rendezvous-sized). */
std::vector<WireCase> wire_cases();

/**
 * @brief `count` small valid tensors (sequences 1..count, tensor 0 of the series each), except
 *        that sequence `refused` (0: none) has a reserved field set and is refused.
 */
std::vector<WireCase> burst_cases(std::uint64_t count, std::uint64_t refused);

/** @brief Tensor 0 of the series as `sequence`, refused for its dtype, confirming `run`. */
WireCase refused_with_answer(std::uint64_t sequence, ucx::AnsweredRun run);

}  // namespace holoscan::test
