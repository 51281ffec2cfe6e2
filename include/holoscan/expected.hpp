#pragma once
/**
 * @file
 * @brief `expected<T, E>` and Holoscan's helpers around it; every fallible call here returns one.
 */
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include <tl/expected.hpp>

#include "holoscan/errors.hpp"

namespace holoscan {

/** @brief Result of a fallible call: a value or an error (an Error unless said otherwise). */
template <class T, class E = Error>
using expected = tl::expected<T, E>;

/** @brief The failure half of `expected` (tl's class template, so `unexpected(error)` deduces). */
using tl::unexpected;

/** @brief Thrown by `expected::value()` when there is no value. */
template <class E>
using bad_expected_access = tl::bad_expected_access<E>;

/** @brief Type of the tag that constructs an `expected` in its failure state in place. */
using unexpect_t = tl::unexpect_t;

/** @brief Tag to construct an `expected` in its failure state in place. */
using tl::unexpect;

/** @brief Wraps `e` as the failure value of an `expected` (Holoscan's spelling). */
template <class E>
constexpr unexpected<std::decay_t<E>> make_unexpected(E&& e) {
  return unexpected<std::decay_t<E>>(std::forward<E>(e));
}

/** @brief Builds an Error and wraps it as the failure value of an `expected`, in one expression. */
inline unexpected<Error> make_unexpected(ErrorCode code, std::string message,
                                         std::uint64_t provenance = 0) {
  return unexpected<Error>(Error{code, std::move(message), provenance});
}

/** @brief The error of a failed `expected`, re-wrapped to return it from another. */
template <class T, class E>
unexpected<E> forward_error(const expected<T, E>& result) {
  return unexpected<E>(result.error());
}

/** @brief The error of a failed `expected`, moved into the failure value of another. */
template <class T, class E>
unexpected<E> forward_error(expected<T, E>&& result) {
  return unexpected<E>(std::move(result).error());
}

namespace error_detail {

/** @brief The failure value for an Error with `code` and `message`. */
inline unexpected<Error> unexpected_runtime_error(ErrorCode code, std::string_view message) {
  return unexpected<Error>(Error{code, std::string(message), 0});
}

}  // namespace error_detail

}  // namespace holoscan
