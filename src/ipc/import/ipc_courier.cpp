// The courier thread. Its list is intrusive (each outbox carries its link and a hold on itself),
// so handing an outbox over allocates nothing on the caller's thread; the thread allocates its
// own working copies. Lock order: an outbox's lock, then the courier's.
#include "ipc/import/ipc_courier.hpp"

#include <poll.h>
#include <pthread.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <new>
#include <system_error>
#include <thread>
#include <vector>

#include "ipc/ipc_error.hpp"
#include "stream/fork_locked.hpp"

namespace holoscan::ipc::detail {
namespace {

// How long the thread waits for room before it looks for outboxes handed over meanwhile.
constexpr int kRoundMs = 10;

class Courier {
 public:
  /** @brief The process's courier (fork_locked: never destroyed, since its thread may outlive
   *         static destructors; no function-local static a fork() could copy half-made). */
  static Courier& instance() noexcept { return holoscan::detail::fork_locked<Courier>(); }

  expected<void, Error> start() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (running_) {
      return {};
    }
    try {
      std::thread([this] { run(); }).detach();
    } catch (const std::bad_alloc&) {
      return make_unexpected(out_of_memory("ipc courier"));
    } catch (const std::system_error& e) {
      return make_unexpected(system_error("ipc courier", "std::thread", e.code().value()));
    }
    running_ = true;
    return {};
  }

  void take(Outbox& outbox) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    outbox.courier_link().next = first_;
    first_ = &outbox;
    wake_.notify_one();
  }

  void drop(Outbox& outbox) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    for (Outbox** at = &first_; *at != nullptr; at = &(*at)->courier_link().next) {
      if (*at == &outbox) {
        *at = outbox.courier_link().next;
        outbox.courier_link().next = nullptr;
        return;
      }
    }
  }

 private:
  // Copies the list, each outbox held, so that none goes while the thread works on it (only this
  // thread takes outboxes off the list, in courier_flush).
  void snapshot(std::vector<std::shared_ptr<Outbox>>& outboxes) {
    std::unique_lock<std::mutex> lock(mutex_);
    wake_.wait(lock, [&] { return first_ != nullptr; });
    for (Outbox* outbox = first_; outbox != nullptr; outbox = outbox->courier_link().next) {
      outboxes.push_back(outbox->courier_link().hold);
    }
  }

  [[noreturn]] void run() noexcept {
    std::vector<std::shared_ptr<Outbox>> outboxes;
    std::vector<pollfd> full;
    for (;;) {
      bool retry = false;
      try {
        snapshot(outboxes);
        for (const auto& outbox : outboxes) {
          switch (outbox->courier_flush()) {
            case Outbox::Progress::kWaiting:
              full.push_back(pollfd{outbox->fd(), POLLOUT, 0});
              break;
            case Outbox::Progress::kRetryLater:
              retry = true;
              break;
            case Outbox::Progress::kDone:
              break;
          }
        }
      } catch (...) {
        retry = true;  // out of memory for the working copies: try again in a round
      }
      outboxes.clear();  // an outbox that is done may be destroyed here, closing its socket
      if (!full.empty() || retry) {
        (void)::poll(full.data(), full.size(), kRoundMs);  // the full ones are still held
      }
      full.clear();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  Outbox* first_ = nullptr;
  bool running_ = false;
};

// A forked child has no courier thread, and its parent sends its own queues: the child forgets
// the parent's courier and makes its own on first use.
[[maybe_unused]] const bool fork_handlers_registered =
    holoscan::detail::register_fork_handlers<Courier>();

}  // namespace

expected<void, Error> start_courier() { return Courier::instance().start(); }

void courier_take(Outbox& outbox) noexcept { Courier::instance().take(outbox); }

void courier_drop(Outbox& outbox) noexcept { Courier::instance().drop(outbox); }

}  // namespace holoscan::ipc::detail
