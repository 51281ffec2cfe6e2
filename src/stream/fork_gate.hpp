#pragma once
// Keeps fork() out of the one-time set-up of process-wide objects made on first use.
//
// A fork() copies one thread: anything another thread was half-way through (a function-local
// static's guard, a lock, an object made but not yet locked by the prepare handler that looked
// for it) stays that way in the child for good. Set-up runs inside a ForkGate::Section; the
// prepare handler of each such object closes the gate first, which waits for the sections in
// progress and holds new ones back until the fork() is over. No lock is held across the fork:
// the child resets the gate, since no thread of the parent is inside a section there.
#include "wing_api.hpp"

namespace holoscan::detail {

/** @brief Lets set-up sections and fork() exclude each other, without a lock. */
class HOLOSCAN_DLPACK_WING_API ForkGate {
 public:
  /** @brief A set-up section: entered after any fork() in progress, waited for by the next. */
  class Section {
   public:
    Section() noexcept;
    ~Section();
    Section(const Section&) = delete;
    Section& operator=(const Section&) = delete;
  };

  /** @brief For a pthread_atfork prepare handler: waits for the sections in progress. */
  static void close() noexcept;
  /** @brief For the matching parent handler: lets sections in again. */
  static void open_in_parent() noexcept;
  /** @brief For the matching child handler: the child has no thread inside a section. */
  static void open_in_child() noexcept;
};

}  // namespace holoscan::detail
