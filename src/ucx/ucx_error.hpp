#pragma once
// Turns a UCX status into an Error whose code says what the caller can do about it.
#include <string>

#include <ucs/type/status.h>

#include "holoscan/expected.hpp"

namespace holoscan::ucx::detail {

/** @brief Whether `status` means that the connection is gone (reset, unreachable, timed out). */
bool is_connection_failure(ucs_status_t status) noexcept;

/** @brief The name of `status` in UCX's header (UCS_ERR_CONNECTION_RESET), or null for a value
 *         it names only as part of a range (the link and endpoint failures) or not at all. */
const char* status_name(ucs_status_t status) noexcept;

/** @brief "<UCX's text>, <name> (<number>)", or without the name where status_name() has none. */
std::string describe_status(ucs_status_t status);

/**
 * @brief Error{code, "<who>: <call> failed: " + describe_status(status)}: kClosed for a connection
 *        failure, kTimeout, kResourceExhausted for exhausted memory or resources, kNotImplemented
 *        for an unsupported request, kInvalidArgument for a bad address or parameter, else
 *        kFailure.
 */
Error ucx_error(const std::string& who, const char* call, ucs_status_t status);

}  // namespace holoscan::ucx::detail
