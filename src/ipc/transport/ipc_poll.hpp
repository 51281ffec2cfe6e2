#pragma once
// Waiting on one socket with a deadline that survives EINTR, and errno failures as Errors.
#include <chrono>
#include <optional>
#include <utility>

#include "holoscan/expected.hpp"
#include "holoscan/export.hpp"

namespace holoscan::ipc::detail {

/** @brief A point in time `timeout_ms` from construction; negative means never. */
class HOLOSCAN_DLPACK_ABI Deadline {
 public:
  /** @brief Starts the clock. */
  explicit Deadline(int timeout_ms) noexcept;
  /** @brief Milliseconds left for poll(): -1 without a limit, 0 once passed. */
  int remaining_ms() const noexcept;

 private:
  bool unlimited_;
  std::chrono::steady_clock::time_point end_;
};

/** @brief Waits until `fd` reports one of `events` (or an error or hang-up), or `also` (when not
 *         -1) becomes readable; false on timeout. */
expected<bool, Error> wait_ready(int fd, short events, const Deadline& deadline, const char* who,
                                 int also = -1);

/**
 * @brief wait_ready() for calls that return `expected<std::optional<T>>`: nullopt once `fd` is
 * ready, else the result to return at once (the failure, or nullopt for the timeout).
 */
template <class T>
std::optional<expected<std::optional<T>, Error>> wait_or_result(int fd, short events,
                                                                const Deadline& deadline,
                                                                const char* who) {
  auto ready = wait_ready(fd, events, deadline, who);
  if (!ready) {
    return expected<std::optional<T>, Error>(make_unexpected(std::move(ready.error())));
  }
  if (!*ready) {
    return expected<std::optional<T>, Error>(std::optional<T>());
  }
  return std::nullopt;
}

}  // namespace holoscan::ipc::detail
