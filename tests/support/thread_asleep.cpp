#include "support/thread_asleep.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <thread>

namespace holoscan::test {

pid_t current_thread_id() noexcept { return static_cast<pid_t>(::syscall(SYS_gettid)); }

bool wait_until_asleep(pid_t thread, std::chrono::milliseconds patience) {
  const std::string channel = "/proc/self/task/" + std::to_string(thread) + "/wchan";
  const auto until = std::chrono::steady_clock::now() + patience;
  do {
    std::ifstream file(channel);
    std::string where;
    if (!file || !std::getline(file, where)) {
      return false;  // no such thread (it ended), or no wait channel to read
    }
    // poll_schedule_timeout (poll, ppoll), do_epoll_wait or ep_poll (epoll_wait),
    // hrtimer_nanosleep or do_nanosleep (nanosleep)
    if (where.find("poll") != std::string::npos || where.find("nanosleep") != std::string::npos) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  } while (std::chrono::steady_clock::now() < until);
  return false;
}

}  // namespace holoscan::test
