#pragma once
// The test binaries replace the global operator new (allocation_hooks.cpp, linked into each
// executable) so that a test can count this thread's allocations or make some of them fail.
// Both act on the calling thread only; no gtest macro may run while either is active (it
// allocates).
#include <cstdint>

namespace holoscan::test {

/** @brief Depth of AllocationsNeverFail scopes on this thread (read by operator new). */
inline thread_local int allocations_never_fail_depth = 0;

/**
 * @brief While alive, this thread's allocations neither fail nor use up a FailingAllocations'
 *        skip: for test doubles of code that never throws (the fake CUDA runtime's bookkeeping),
 *        so that a sweep fails the library's allocations only. Header-only: the doubles link
 *        without the hooks.
 */
class AllocationsNeverFail {
 public:
  /** @brief Exempts this thread's allocations. */
  AllocationsNeverFail() noexcept { ++allocations_never_fail_depth; }
  /** @brief Ends the exemption. */
  ~AllocationsNeverFail() { --allocations_never_fail_depth; }
  AllocationsNeverFail(const AllocationsNeverFail&) = delete;
  AllocationsNeverFail& operator=(const AllocationsNeverFail&) = delete;
};

/** @brief Counts operator new calls of this thread while alive. */
class NewCounter {
 public:
  /** @brief Starts counting from zero. */
  NewCounter() noexcept;
  /** @brief Stops counting. */
  ~NewCounter();
  NewCounter(const NewCounter&) = delete;
  NewCounter& operator=(const NewCounter&) = delete;
  /** @brief Calls counted so far. */
  std::uint64_t calls() const noexcept;
};

/**
 * @brief While alive, `count` operator new calls of this thread fail after the first `skip`
 *        (std::bad_alloc; the nothrow forms return null).
 */
class FailingAllocations {
 public:
  /** @brief Arms the failures. */
  explicit FailingAllocations(std::uint64_t skip, std::uint64_t count = 1) noexcept;
  /** @brief Disarms them. */
  ~FailingAllocations();
  FailingAllocations(const FailingAllocations&) = delete;
  FailingAllocations& operator=(const FailingAllocations&) = delete;
  /** @brief How many allocations failed so far. */
  std::uint64_t failed() const noexcept;
};

}  // namespace holoscan::test
