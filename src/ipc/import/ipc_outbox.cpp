#include "ipc/import/ipc_outbox.hpp"

#include <poll.h>

#include <cerrno>
#include <new>
#include <utility>

#include "ipc/import/ipc_courier.hpp"
#include "ipc/ipc_error.hpp"
#include "ipc/transport/ipc_record.hpp"

namespace holoscan::ipc::detail {
namespace {

constexpr const char* kWho = "ipc importer";

Error exporter_gone() {
  return Error{ErrorCode::kClosed, std::string(kWho) + ": the exporter has hung up", 0};
}

Error exporter_exited_error() {
  return Error{ErrorCode::kClosed, std::string(kWho) + ": the exporter's process has exited", 0};
}

}  // namespace

expected<std::shared_ptr<Outbox>, Error> Outbox::create(Channel channel, UniqueFd exporter) {
  if (auto started = start_courier(); !started) {
    return make_unexpected(std::move(started.error()));
  }
  try {
    return std::make_shared<Outbox>(std::move(channel), std::move(exporter));
  } catch (const std::bad_alloc&) {
    return make_unexpected(out_of_memory(kWho));
  }
}

Outbox::Received Outbox::receive_now() {
  Received received{std::optional<Message>(), std::nullopt};
  std::lock_guard<std::mutex> lock(mutex_);
  (void)flush_locked();  // a hung-up exporter's last messages are still read below
  // Room for the Release of whatever Publish comes next, before it is read.
  try {
    grow(promised_ + 1);
  } catch (const std::bad_alloc&) {
    received.message = make_unexpected(out_of_memory(kWho));
    return received;
  }
  received.message = channel_.receive(0);
  // Nothing left to read from an exporter whose process exited: the records it sent before came
  // first, and no more will come, whoever else holds its end of the socket.
  if (received.message && !*received.message && exporter_exited()) {
    closed_ = true;
    queued_ = 0;
    received.message = make_unexpected(exporter_exited_error());
  }
  received.refused_export = channel_.refused_export();
  received.refused_fd_allocation = channel_.refused_fd_allocation();
  received.refused_forget = channel_.refused_forget_allocation();
  const bool publish =
      received.message && *received.message && std::holds_alternative<Publish>(**received.message);
  promised_ += publish || received.refused_export ? 1 : 0;
  return received;
}

expected<void, Error> Outbox::promise() {
  std::lock_guard<std::mutex> lock(mutex_);
  try {
    grow(promised_ + 1);
  } catch (const std::bad_alloc&) {
    return make_unexpected(out_of_memory(kWho));
  }
  ++promised_;
  return {};
}

void Outbox::withdraw_promise() noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  promised_ -= promised_ > 0 ? 1 : 0;
}

void Outbox::send(const Release& release) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  if (promised_ > 0) {
    --promised_;
  } else {
    try {
      grow(promised_ + 1);  // the room promised to others stays theirs
    } catch (...) {
      // No room and no memory: send it now if the socket takes it, in order or not (Releases
      // of different exports are independent); otherwise it is lost.
      if (queued_ > 0 || closed_) {
        return;
      }
      auto frame = encode_frame(release);
      if (frame) {
        (void)send_record_now(channel_.fd(), *frame, -1);
      }
      return;
    }
  }
  if (closed_) {
    return;  // nobody to tell: the exporter learns from end-of-file instead
  }
  push(release);
  if (flush_locked() != 0 && queued_ > 0) {
    hand_to_courier_locked();  // a full socket, or one that refused for another reason
  }
}

expected<void, Error> Outbox::flush() {
  std::lock_guard<std::mutex> lock(mutex_);
  const int err = flush_locked();
  // With nothing to send, no send fails: a hung-up exporter shows only in the socket's state, an
  // exited one in its pidfd's (both asked in one call).
  if (!closed_ && queued_ == 0) {
    pollfd state[2] = {{channel_.fd(), 0, 0}, {exporter_.get(), POLLIN, 0}};
    closed_ = ::poll(state, exporter_.get() >= 0 ? 2 : 1, 0) > 0 &&
              ((state[0].revents & (POLLHUP | POLLERR)) != 0 || (state[1].revents & POLLIN) != 0);
  }
  if (closed_) {
    return make_unexpected(exporter_gone());
  }
  if (err != 0 && err != EAGAIN) {
    return make_unexpected(system_error(kWho, "sendmsg", err));
  }
  return {};
}

std::size_t Outbox::queued() const noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  return queued_;
}

Outbox::Progress Outbox::courier_flush() noexcept {
  std::shared_ptr<Outbox> hold;  // dropped after the lock: it may be the last owner
  std::lock_guard<std::mutex> lock(mutex_);
  const int err = flush_locked();
  if (queued_ > 0 && err == EAGAIN) {
    return Progress::kWaiting;
  }
  if (queued_ > 0 && !closed_) {
    return Progress::kRetryLater;
  }
  courier_drop(*this);
  with_courier_ = false;
  hold = std::move(link_.hold);
  return Progress::kDone;
}

void Outbox::grow(std::size_t more) {
  if (room_for(more)) {
    return;
  }
  std::vector<Release> larger(2 * (queued_ + more));
  for (std::size_t i = 0; i < queued_; ++i) {
    larger[i] = slots_[(head_ + i) % slots_.size()];
  }
  slots_ = std::move(larger);
  head_ = 0;
}

void Outbox::push(const Release& release) noexcept {
  slots_[(head_ + queued_) % slots_.size()] = release;
  ++queued_;
}

int Outbox::flush_locked() noexcept {
  while (queued_ > 0 && !closed_) {
    auto frame = encode_frame(slots_[head_]);  // a Release the importer made: it encodes
    const int err = frame ? send_record_now(channel_.fd(), *frame, -1) : 0;
    if (err == EAGAIN && exporter_exited()) {
      closed_ = true;  // a socket nobody reads any more: the exporter's claims went with it
      queued_ = 0;
      return EPIPE;
    }
    if (err == EAGAIN || (err != 0 && !hung_up(err))) {
      return err;
    }
    if (err != 0) {
      closed_ = true;  // what is left is dropped: the exporter frees its claims itself
      queued_ = 0;
      return err;
    }
    head_ = (head_ + 1) % slots_.size();
    --queued_;
  }
  return 0;
}

bool Outbox::exporter_exited() const noexcept {
  if (exporter_.get() < 0) {
    return false;
  }
  pollfd process{exporter_.get(), POLLIN, 0};
  return ::poll(&process, 1, 0) == 1 && (process.revents & POLLIN) != 0;
}

void Outbox::hand_to_courier_locked() noexcept {
  if (with_courier_) {
    return;
  }
  with_courier_ = true;
  link_.hold = shared_from_this();
  courier_take(*this);
}

}  // namespace holoscan::ipc::detail
