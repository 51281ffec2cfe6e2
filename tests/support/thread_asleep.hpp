#pragma once
// Whether another thread of the test has reached a blocking wait: read from the kernel's record
// of where the thread sleeps, instead of guessed with a sleep, which a loaded machine (two cores,
// a sanitizer build, tests beside) can outlast. Tests that destroy an object while another thread
// waits in it need the thread inside the call first: one not yet there would use a freed object.
#include <sys/types.h>

#include <chrono>

namespace holoscan::test {

/** @brief The calling thread's kernel id, for wait_until_asleep() on another thread. */
pid_t current_thread_id() noexcept;

/**
 * @brief Returns once thread `thread` of this process sleeps in poll(), ppoll(), epoll_wait() or
 *        nanosleep() (its wait channel, /proc/self/task/<id>/wchan, names one), true; false after
 *        `patience` without seeing it (a kernel that shows no wait channel, or a wait of another
 *        kind), or at once when the thread has ended.
 */
bool wait_until_asleep(pid_t thread, std::chrono::milliseconds patience = std::chrono::seconds(10));

}  // namespace holoscan::test
