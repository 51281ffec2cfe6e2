#pragma once
// The out-of-memory sweep the core's tests share: a call is tried with every allocation failing
// from the first on, then from the second on, and so on, until it runs without a failure.
#include <gtest/gtest.h>

#include <cstdint>

#include "support/allocation_hooks.hpp"

namespace holoscan::test {

/** @brief Enough failing allocations to fail every allocation of one call. */
inline constexpr std::uint64_t kEveryAllocation = 1000;

/**
 * @brief Runs `attempt()` with every allocation failing after the first `skip`, for skip = 0, 1,
 *        ... until one ran without a failure, each after `prepare()` and followed by
 *        `check(skip)` (no gtest macro may run inside `attempt`: it allocates). Fails the test if
 *        no attempt saw a failure, or if every one did.
 */
template <class Prepare, class Attempt, class Check>
void sweep_allocations(Prepare&& prepare, Attempt&& attempt, Check&& check) {
  for (std::uint64_t skip = 0; skip < 200; ++skip) {
    prepare();
    std::uint64_t failed = 0;
    {
      FailingAllocations failing(skip, kEveryAllocation);
      attempt();
      failed = failing.failed();
    }
    check(skip);
    if (failed == 0) {
      EXPECT_GT(skip, 0u) << "no allocation failed: the sweep saw nothing";
      return;
    }
  }
  ADD_FAILURE() << "every attempt saw a failed allocation";
}

}  // namespace holoscan::test
