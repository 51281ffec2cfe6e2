#pragma once
// The errors of the IPC pieces, each message led by the piece that refused ("ipc channel: ...").
#include <cstdint>
#include <string>

#include "holoscan/expected.hpp"
#include "holoscan/export.hpp"

namespace holoscan::ipc::detail {

/** @brief kInvalidArgument with the message "<who>: <what>". */
Error invalid_argument(const char* who, const std::string& what);

/** @brief kFailure for a failed system call: `who`, the call and the text of `err`. */
Error system_error(const char* who, const char* call, int err);

/**
 * @brief kResourceExhausted, "<who>: out of memory"; never throws (the message is left empty
 *        when even that cannot be allocated).
 */
Error out_of_memory(const char* who) noexcept;

/** @brief `value` in hexadecimal with a 0x prefix, e.g. for flag words. */
HOLOSCAN_DLPACK_ABI std::string hex(std::uint64_t value);

}  // namespace holoscan::ipc::detail
