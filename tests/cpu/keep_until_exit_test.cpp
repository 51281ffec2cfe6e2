// Covers detail::keep_until_exit: what it keeps is never destroyed, the heap refusing included
// (then the static slots take it), so memory that GPU or transport work may still use is never
// freed under that work.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>

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

// A value whose move, once armed, stops until told to go on: the thread moving it is inside
// keep_until_exit() when another thread forks.
struct StallingMove {
  static inline std::atomic<int> stage{0};  // 1: armed, 2: stalled in a move, 3: go on
  StallingMove() = default;
  StallingMove(StallingMove&& /*other*/) noexcept {
    int armed = 1;
    if (stage.compare_exchange_strong(armed, 2)) {
      while (stage.load() != 3) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
  }
  StallingMove& operator=(StallingMove&&) = delete;
};

TEST(KeepUntilExit, AForkWhileAnotherThreadKeepsAValueLeavesTheChildAbleToKeepValues) {
  StallingMove::stage = 1;
  std::thread keeper([] { detail::keep_until_exit(StallingMove{}); });
  while (StallingMove::stage.load() != 2) {
    std::this_thread::yield();
  }
  const pid_t child = ::fork();
  if (child == 0) {
    ::alarm(10);  // a child that hangs is ended by SIGALRM
    detail::keep_until_exit(StallingMove{});
    ::_exit(0);
  }
  StallingMove::stage = 3;
  keeper.join();
  ASSERT_GT(child, 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "the child hung in keep_until_exit (signal "
      << (WIFSIGNALED(status) ? WTERMSIG(status) : 0) << ")";
}

}  // namespace
}  // namespace holoscan
