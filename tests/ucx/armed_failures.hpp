#pragma once
// Failures a test arms and a replaced UCX call takes one at a time, from whichever thread
// progresses the worker (failing_am_send.cpp, failing_landing.cpp).
#include <atomic>
#include <cstddef>

#include <ucp/api/ucp.h>

namespace holoscan::test {

/** @brief A number of armed failures with their status; constant-initialized, so usable early. */
class ArmedFailures {
 public:
  /** @brief The next `count` take()s succeed; the count of failures made restarts. */
  void arm(ucs_status_t status, std::size_t count) noexcept {
    failed_.store(0);
    status_.store(status);
    left_.store(count);
  }
  /** @brief No failure is left. */
  void disarm() noexcept { left_.store(0); }
  /** @brief Claims one armed failure; false when none is left. */
  bool take() noexcept {
    std::size_t left = left_.load();
    while (left > 0 && !left_.compare_exchange_weak(left, left - 1)) {
    }
    if (left == 0) {
      return false;
    }
    failed_.fetch_add(1);
    return true;
  }
  /** @brief The status the failures report. */
  ucs_status_t status() const noexcept { return status_.load(); }
  /** @brief Failures taken since arm(). */
  std::size_t failed() const noexcept { return failed_.load(); }

 private:
  std::atomic<ucs_status_t> status_{UCS_OK};
  std::atomic<std::size_t> left_{0};
  std::atomic<std::size_t> failed_{0};
};

}  // namespace holoscan::test
