#pragma once
// A process-wide object that is never destroyed and whose lock is held across fork(): a fork()
// while another thread holds it would leave it held for good in the child.
#include <pthread.h>

namespace holoscan::detail {

template <class T>
T& fork_locked();

/** @brief pthread_atfork handler: takes `T`'s lock before the fork. */
template <class T>
void lock_before_fork() noexcept {
  fork_locked<T>().mutex.lock();
}

/** @brief pthread_atfork handler: gives `T`'s lock back in the parent and in the child. */
template <class T>
void unlock_after_fork() noexcept {
  fork_locked<T>().mutex.unlock();
}

/**
 * @brief The one `T` of the process (its `mutex` member is held across fork()), created on
 *        first use and leaked: it must outlive every static destructor that may still use it.
 */
template <class T>
T& fork_locked() {
  static T* instance = [] {
    auto* created = new T();
    (void)pthread_atfork(&lock_before_fork<T>, &unlock_after_fork<T>, &unlock_after_fork<T>);
    return created;
  }();
  return *instance;
}

}  // namespace holoscan::detail
