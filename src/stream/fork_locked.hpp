#pragma once
// A process-wide object that is made on first use and never destroyed, and that a forked child
// forgets: the child makes its own on first use.
//
// No function-local static: a fork() while another thread ran such an initializer would copy its
// guard taken, and the child's first use would wait for it for ever. The object is published
// through a constant-initialized pointer and made inside a ForkGate section (a fork() waits for
// it). No lock is held across fork(): prepare handlers run in the reverse order of registration,
// so a lock taken by ours could be taken after a lock of a library that registered later and that
// this object's users call while holding ours (the CUDA runtime, a test's fake), and fork() would
// wait for good. The child forgets the object instead (leaked: a thread of the parent may have
// been changing it), which is all a child can do with CUDA objects of its parent anyway.
#include <pthread.h>

#include <atomic>

#include "stream/fork_gate.hpp"

namespace holoscan::detail {

/** @brief The one `T` of the process once made, else null (constant-initialized). */
template <class T>
inline std::atomic<T*> fork_locked_instance{nullptr};

/**
 * @brief The one `T` of the process, made on first use and leaked: it must outlive every static
 *        destructor that may still use it. `T`'s constructor must not make another such object
 *        (a set-up section inside another would wait for a fork() that waits for the first).
 */
template <class T>
T& fork_locked() {
  if (T* made = fork_locked_instance<T>.load(std::memory_order_acquire); made != nullptr) {
    return *made;
  }
  ForkGate::Section section;  // made and published whole before a fork() copies the pointer
  T* made = nullptr;
  T* fresh = new T();
  if (!fork_locked_instance<T>.compare_exchange_strong(made, fresh, std::memory_order_acq_rel)) {
    delete fresh;  // another thread's came first
    return *made;
  }
  return *fresh;
}

/** @brief pthread_atfork child handler: the child forgets `T` and lets set-up sections in. */
template <class T>
void forget_in_child() noexcept {
  fork_locked_instance<T>.store(nullptr, std::memory_order_release);
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
