#pragma once
/**
 * @file
 * @brief Error type and `expected` alias used by every fallible call of holoscan-dlpack.
 */
#include <cstdint>
#include <string>
#include <utility>

#include <tl/expected.hpp>

namespace holoscan {

/** @brief Category of a failure; `provenance` in Error carries the detail (e.g. a cudaError_t). */
enum class ErrorCode : std::int32_t {
  kSuccess = 0,      ///< No failure.
  kFailure,          ///< A failure with no more specific category.
  kInvalidArgument,  ///< An argument or an imported DLPack field is invalid.
  kNotImplemented,   ///< Unsupported, including "this memory reference has no readiness contract".
  kNotReady,         ///< The operation would block, or the state it needs does not exist yet.
  kResourceExhausted,  ///< A pool or the heap has nothing left to give.
  kCudaError,          ///< A CUDA runtime call failed; provenance holds its cudaError_t.
};

/** @brief The enumerator's name, e.g. "kInvalidArgument"; "kUnknown" for values out of range. */
const char* error_code_name(ErrorCode code) noexcept;

/** @brief A failure: its category, a human-readable message and its numeric origin. */
struct Error {
  ErrorCode code = ErrorCode::kFailure;  ///< Category of the failure.
  std::string message;                   ///< What failed and why; empty costs no allocation.
  std::uint64_t provenance = 0;          ///< The cudaError_t value for CUDA failures, else 0.
};

/** @brief Result of a fallible call: a value or an Error. */
template <class T, class E = Error>
using expected = tl::expected<T, E>;

/** @brief The failure half of `expected` (tl's class template, so `unexpected(error)` deduces). */
using tl::unexpected;

/** @brief Tag to construct an `expected` in its failure state in place. */
using tl::unexpect;

/** @brief Wraps `error` as the failure value of an `expected`. */
inline unexpected<Error> make_unexpected(Error error) { return unexpected<Error>(std::move(error)); }

/** @brief Builds the failure value of an `expected` in one expression. */
inline unexpected<Error> make_unexpected(ErrorCode code, std::string message,
                                         std::uint64_t provenance = 0) {
  return unexpected<Error>(Error{code, std::move(message), provenance});
}

}  // namespace holoscan
