#pragma once
// For the calls documented never to throw whose refusals build their messages on the heap.
#include "holoscan/expected.hpp"

namespace holoscan::detail {

/** @brief kResourceExhausted without a message: out of host memory, even a message may not fit. */
inline tl::unexpected<Error> out_of_memory() noexcept {
  return make_unexpected(Error{ErrorCode::kResourceExhausted, {}, 0});
}

/**
 * @brief `make()`, or kResourceExhausted without a message when it throws (the heap refused even
 *        an error's message). `make` must hold nothing once it has thrown.
 */
template <class Make>
auto without_throwing(Make&& make) noexcept -> decltype(make()) {
  try {
    return make();
  } catch (...) {
    return out_of_memory();
  }
}

}  // namespace holoscan::detail
