// Covers detail::keep_until_exit: what it keeps is never destroyed, the heap refusing included
// (then the static slots take it), so memory that GPU or transport work may still use is never
// freed under that work.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>

#include "keep_until_exit.hpp"
#include "support/allocation_sweep.hpp"

namespace holoscan {
namespace {

// A value whose destruction is counted (its control block comes from the heap before the test
// makes the heap fail).
std::shared_ptr<int> counted(const std::shared_ptr<int>& destroyed) {
  return std::shared_ptr<int>(new int(0), [destroyed](int* value) {
    ++*destroyed;
    delete value;
  });
}

TEST(KeepUntilExit, WhatItKeepsIsNeverDestroyed) {
  auto destroyed = std::make_shared<int>(0);
  for (int i = 0; i < 100; ++i) {
    detail::keep_until_exit(counted(destroyed));
  }
  EXPECT_EQ(*destroyed, 0);
}

// A type of its own, so that its store is made under the failing heap (a fresh instantiation).
struct KeptWhileRefused {
  std::shared_ptr<int> value;
};

TEST(KeepUntilExit, WhatItKeepsIsNeverDestroyedWhenTheHeapRefuses) {
  auto destroyed = std::make_shared<int>(0);
  std::uint64_t refused = 0;
  for (int i = 0; i < 8; ++i) {
    KeptWhileRefused kept{counted(destroyed)};
    test::FailingAllocations failing(0, test::kEveryAllocation);
    detail::keep_until_exit(std::move(kept));
    refused += failing.failed();
  }
  EXPECT_GT(refused, 0u) << "the heap was never asked: the test saw nothing";
  EXPECT_EQ(*destroyed, 0);
}

}  // namespace
}  // namespace holoscan
