#pragma once
// A process-wide object that is made on first use and never destroyed. What a forked child does
// with it is the type's choice: with register_fork_handlers<T> the child forgets it and makes its
// own on first use; a type may register handlers of its own instead (the release queue keeps its
// object in the child and renews its locks).
//
// No function-local static: a fork() while another thread ran such an initializer would copy its
// guard taken, and the child's first use would wait for it for ever. The object is published
// through a constant-initialized pointer and made inside a ForkGate section (a fork() waits for
// it). With register_fork_handlers<T>, no lock is held across fork(): prepare handlers run in the
// reverse order of registration, so a lock taken by ours could be taken after a lock of a library
// that registered later and that this object's users call while holding ours (the CUDA runtime, a
// test's fake), and fork() would wait for good. The child forgets the object instead (leaked: a
// thread of the parent may have been changing it), which is all a child can do with CUDA objects of
// its parent anyway. The object lives in static storage: making it never fails, even with the heap
// exhausted.
#include <pthread.h>

#include <atomic>
#include <new>
#include <thread>

#include "stream/fork_gate.hpp"

namespace holoscan::detail {

/** @brief The one `T` of the process once made, else null (constant-initialized). */
template <class T>
inline std::atomic<T*> fork_locked_instance{nullptr};

/** @brief Whether a thread has begun making the one `T` (constant-initialized). */
template <class T>
inline std::atomic<bool> fork_locked_claimed{false};

/**
 * @brief Where the one `T` lives: static storage, not the heap, so that making it cannot fail
 *        (its users are noexcept paths that have no way to report that the heap refused).
 */
template <class T>
struct alignas(T) ForkLockedStorage {
  unsigned char bytes[sizeof(T)];
};
template <class T>
inline ForkLockedStorage<T> fork_locked_storage;

/**
 * @brief The one `T` of the process, made on first use and never destroyed: it must outlive
 *        every static destructor that may still use it. `T`'s constructor must not throw nor make
 *        another such object (a set-up section inside another would wait for a fork() that waits
 *        for the first).
 */
template <class T>
T& fork_locked() noexcept {
  static_assert(noexcept(T()), "made where nothing may throw");  // T may befriend this function
  if (T* made = fork_locked_instance<T>.load(std::memory_order_acquire); made != nullptr) {
    return *made;
  }
  ForkGate::Section section;  // made and published whole before a fork() copies the pointer
  if (!fork_locked_claimed<T>.exchange(true, std::memory_order_acq_rel)) {
    T* made = new (fork_locked_storage<T>.bytes) T();
    fork_locked_instance<T>.store(made, std::memory_order_release);
    return *made;
  }
  // Another thread is making it, inside its own section (no fork() can come between).
  for (;;) {
    if (T* made = fork_locked_instance<T>.load(std::memory_order_acquire); made != nullptr) {
      return *made;
    }
    std::this_thread::yield();
  }
}

/** @brief The one `T` of the process if it was made, else null (makes none). */
template <class T>
T* fork_locked_if_made() noexcept {
  return fork_locked_instance<T>.load(std::memory_order_acquire);
}

/** @brief pthread_atfork child handler: the child forgets `T` and lets set-up sections in. */
template <class T>
void forget_in_child() noexcept {
  // The parent's object is left as it was (a thread of the parent may have been changing it);
  // the child's first use makes a fresh one over it.
  fork_locked_instance<T>.store(nullptr, std::memory_order_release);
  fork_locked_claimed<T>.store(false, std::memory_order_release);
  ForkGate::open_in_child();
}

/**
 * @brief Registers the fork handlers of `T`; for a namespace-scope initializer in the file that
 *        makes `T`, so that they exist when the library is loaded, before any of its threads (a
 *        registration at first use waits for glibc's atfork lock, which a fork() in progress
 *        holds, with the object half made).
 */
template <class T>
bool register_fork_handlers() noexcept {
  return pthread_atfork(&ForkGate::close, &ForkGate::open_in_parent, &forget_in_child<T>) == 0;
}

}  // namespace holoscan::detail
