// Importer: the Hello exchange, then receive() turns each Publish into an imported Tensor.
#include <poll.h>

#include <atomic>
#include <chrono>
#include <new>
#include <string>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include "holoscan/ipc/importer.hpp"
#include "ipc/import/ipc_importer_core.hpp"
#include "ipc/import/ipc_unready_imports.hpp"
#include "ipc/ipc_error.hpp"
#include "ipc/transport/ipc_handshake.hpp"
#include "ipc/transport/ipc_poll.hpp"
#include "ipc/wire/ipc_frame.hpp"

namespace holoscan::ipc {
namespace {

constexpr const char* kWho = "ipc importer";

// Gives back a Publish whose descriptor there was no memory to decode (room for its Release was
// set aside when it was read), so that the exporter's claim does not wait for this process to exit.
void give_back_unread(detail::ImporterCore& core, const std::vector<std::uint8_t>& descriptor) {
  if (auto id = detail::descriptor_export_id(descriptor.data(), descriptor.size())) {
    core.refuse_unread(*id, detail::descriptor_fd_allocation(descriptor.data(), descriptor.size()),
                       0);
  }
}

// Whether the process behind `pidfd` has exited (-1: none is known, taken as gone).
bool exited(int pidfd) noexcept {
  if (pidfd < 0) {
    return true;
  }
  pollfd entry{pidfd, POLLIN, 0};
  return ::poll(&entry, 1, 0) == 1;
}

// An import whose readiness event cannot be asked was given back (UnreadyImports::take_ready).
Error given_back(Error error) {
  try {
    error.message.insert(0,
                         std::string(kWho) + ": an import held for its readiness was given back: ");
  } catch (...) {  // out of host memory: the code and the call's name still say what failed
  }
  return error;
}

// While imports are held for their readiness, which wakes no descriptor, receive() asks again:
// yielding for a while (a producer's kernel is often a few microseconds), then resting, so that
// a slow producer costs no busy core.
class ReadinessPolling {
 public:
  void rest() {
    const auto now = std::chrono::steady_clock::now();
    if (!started_) {
      started_ = true;
      yield_until_ = now + std::chrono::microseconds(200);
    }
    if (now < yield_until_) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

 private:
  bool started_ = false;
  std::chrono::steady_clock::time_point yield_until_;
};

// Holds the Importer's one receive() while it runs: a second at once would read Publishes out of
// the exporter's order, and one refused as such kept its export's claim (and pool block) until
// this process exited. The class allows one at a time; this makes a second a clear refusal.
class AloneInReceive {
 public:
  explicit AloneInReceive(std::atomic<bool>& receiving) noexcept
      : receiving_(receiving), alone_(!receiving.exchange(true, std::memory_order_acquire)) {}
  AloneInReceive(const AloneInReceive&) = delete;
  AloneInReceive& operator=(const AloneInReceive&) = delete;
  ~AloneInReceive() {
    if (alone_) {
      receiving_.store(false, std::memory_order_release);
    }
  }
  /** @brief Whether no other receive() ran. */
  bool alone() const noexcept { return alone_; }

 private:
  std::atomic<bool>& receiving_;
  bool alone_;
};

// The refusal of a receive() beside another one (kInvalidArgument).
Error receive_beside_another() noexcept {
  try {
    return detail::invalid_argument(
        kWho,
        "receive() is already running on another thread (one at a time: the Publishes "
        "would be read out of the exporter's order)");
  } catch (const std::bad_alloc&) {
    return detail::out_of_memory(kWho);
  }
}

}  // namespace

namespace detail {

// An Importer moved from has no connection: its calls are refused rather than read through none.
Error importer_moved_from() noexcept {
  try {
    return invalid_argument(kWho, "this Importer was moved from");
  } catch (const std::bad_alloc&) {
    return out_of_memory(kWho);
  }
}

// A call woken, or begun, once the Importer was stopped or while its destructor (or a
// move-assignment over it) runs.
Error importer_ending(const ImporterCore& core) noexcept {
  try {
    return Error{ErrorCode::kClosed,
                 std::string(kWho) + (core.stopped() ? ": the importer was stopped"
                                                     : ": the importer is being destroyed"),
                 0};
  } catch (const std::bad_alloc&) {
    return out_of_memory(kWho);
  }
}

}  // namespace detail

Importer::Importer(std::shared_ptr<detail::ImporterCore> core,
                   std::unique_ptr<detail::UnreadyImports> unready) noexcept
    : core_(std::move(core)), unready_(std::move(unready)) {}
Importer::Importer(Importer&& other) noexcept = default;

// Imports keep the connection for their Releases; the Importer going away ends what it receives,
// and gives back the imports it held for their readiness.
Importer& Importer::operator=(Importer&& other) noexcept {
  if (this != &other) {
    if (core_ != nullptr) {
      core_->stop_receiving();  // ends the calls under way first: they read this object
    }
    core_ = std::move(other.core_);
    unready_ = std::move(other.unready_);
  }
  return *this;
}

void Importer::stop() noexcept {
  // Counted like every call: a destructor begun meanwhile waits for it before the core goes.
  const holoscan::detail::CallUnderWay call(detail::calls_of(core_.get()));
  if (core_ != nullptr) {
    core_->stop();
  }
}

Importer::~Importer() {
  if (core_ != nullptr) {
    core_->stop_receiving();  // ends the calls under way first: they read this object
  }
}

expected<Importer, Error> Importer::create(Channel channel, int hello_timeout_ms) {
  ImporterOptions options;
  options.hello_timeout_ms = hello_timeout_ms;
  return create(std::move(channel), options);
}

expected<Importer, Error> Importer::create(Channel channel, const ImporterOptions& options) {
  try {
    std::unique_ptr<detail::UnreadyImports> unready;
    if (options.readiness == ReadinessWait::kOnHost) {
      unready = std::make_unique<detail::UnreadyImports>();
    } else if (options.readiness != ReadinessWait::kOnGpu) {
      return make_unexpected(detail::invalid_argument(
          kWho, "readiness must be ReadinessWait::kOnGpu or kOnHost, not " +
                    std::to_string(static_cast<int>(options.readiness))));
    }
    auto hello =
        detail::exchange_hello(channel, options.hello_timeout_ms, kWho, PeerRole::kImporter);
    if (!hello) {
      return make_unexpected(std::move(hello.error()));
    }
    auto outbox = detail::Outbox::create(std::move(channel), std::move(hello->process));
    if (!outbox) {
      return make_unexpected(std::move(outbox.error()));
    }
    return Importer(std::make_shared<detail::ImporterCore>(std::move(*outbox), hello->pid),
                    std::move(unready));
  } catch (const std::bad_alloc&) {
    // The channel (or the outbox that took it) closes on the way out, as on any refusal.
    return make_unexpected(detail::out_of_memory(kWho));
  }
}

expected<std::optional<Tensor>, Error> Importer::receive(int timeout_ms) {
  const holoscan::detail::CallUnderWay call(detail::calls_of(core_.get()));
  if (core_ == nullptr) {
    return make_unexpected(detail::importer_moved_from());
  }
  const AloneInReceive receiving(core_->receiving());
  if (!receiving.alone()) {
    return make_unexpected(receive_beside_another());
  }
  const detail::Deadline deadline(timeout_ms);
  const detail::Deadline now(0);
  ReadinessPolling polling;
  bool last_pass = false;  // the time is up once an import was held: only ask the oldest again
  // With imports held and nothing (more) to read: the exporter's exit makes their answers final
  // (the unready given back, the ready still to come); else they are asked again until the time
  // is up. False once it is.
  const auto keep_asking = [&] {
    if (call.ending()) {
      return true;  // on to the loop's head, which returns
    }
    if (exited(core_->exporter_fd())) {
      if (unready_->give_back_unready() == 0) {
        last_pass = false;  // nothing held any more: read on, to the kClosed that follows
      }
      return true;
    }
    if (deadline.remaining_ms() == 0) {
      return false;
    }
    polling.rest();
    return true;
  };
  for (;;) {
    if (call.ending()) {
      return make_unexpected(detail::importer_ending(*core_));
    }
    if (unready_ != nullptr) {
      auto ready = unready_->take_ready();
      if (!ready) {
        return make_unexpected(given_back(std::move(ready.error())));
      }
      if (*ready) {
        return std::optional<Tensor>(std::move(**ready));
      }
    }
    // While imports are held, the socket is only asked: their readiness wakes no descriptor.
    const bool holding = unready_ != nullptr && !unready_->empty();
    // Full (or out of time), the socket is left unread, so that the exporter's sends wait
    // (kNotReady there) until the oldest is ready: a stalled export cannot make this process
    // hold every later one.
    if (last_pass || (holding && unready_->size() >= kMaxHeldForReadiness)) {
      if (keep_asking()) {
        continue;
      }
      (void)core_->flush();
      return std::optional<Tensor>();
    }
    // Waiting happens outside the core's locks, so releases from other threads never wait on it.
    // The exporter's process is watched too: its end of the socket may outlive it.
    auto ready = detail::wait_ready(core_->fd(), POLLIN, holding ? now : deadline, kWho,
                                    core_->exporter_fd());
    if (!ready) {
      return make_unexpected(std::move(ready.error()));
    }
    if (call.ending()) {  // woken by the shutdown: what is queued is given back, not read here
      return make_unexpected(detail::importer_ending(*core_));
    }
    if (!*ready) {
      if (holding && keep_asking()) {
        continue;
      }
      (void)core_->flush();
      return std::optional<Tensor>();
    }
    auto received = core_->receive_now();
    if (call.ending()) {
      // Stopped while it read: a Publish read is given back, as the destructor gives back what
      // is still queued, and the stop is what the caller learns (not the end-of-file it caused).
      if (received && *received) {
        if (const auto* publish = std::get_if<Publish>(&**received); publish != nullptr) {
          core_->give_back_unread(*publish);
        }
      }
      return make_unexpected(detail::importer_ending(*core_));
    }
    if (!received) {
      if (received.error().code == ErrorCode::kClosed) {
        // What a hung-up exporter published before may still become ready while its process
        // runs; once it has exited, an event not completed never will (its context is gone):
        // those imports are given back, the ready ones still returned, then kClosed.
        if (holding) {
          if (keep_asking()) {
            continue;
          }
          return std::optional<Tensor>();
        }
        core_->forget_unused();
      }
      return make_unexpected(std::move(received.error()));
    }
    if (!*received) {
      continue;
    }
    auto* publish = std::get_if<Publish>(&**received);
    if (publish == nullptr) {
      core_->refused();  // an exporter sends nothing but Publish after its Hello
      if (deadline.remaining_ms() == 0) {
        // A peer that sends other frames without end must not hold the caller past its limit.
        (void)core_->flush();
        return std::optional<Tensor>();
      }
      continue;
    }
    core_->forget(publish->forget_allocation);  // before this export, which may map it anew
    expected<TensorDescriptor, Error> descriptor = make_unexpected(detail::out_of_memory(kWho));
    try {
      descriptor = decode(publish->descriptor.data(), publish->descriptor.size());
    } catch (const std::bad_alloc&) {
      give_back_unread(*core_, publish->descriptor);
      return make_unexpected(std::move(descriptor.error()));
    }
    if (!descriptor) {
      return make_unexpected(std::move(descriptor.error()));  // the channel validated it already
    }
    // Room for its Release was set aside when the Publish was read.
    auto tensor = detail::import_promised(core_, *descriptor, std::move(publish->fd), true, true);
    if (!tensor) {
      return make_unexpected(std::move(tensor.error()));
    }
    // Held when others are (imports come in the exporter's order) or its event has not completed
    // (or cannot be asked: take_ready() then gives it back with the error).
    if (unready_ != nullptr && (holding || !detail::readiness_passed(*tensor).value_or(false))) {
      // Behind the ones held before: imports are returned in the exporter's order.
      try {
        unready_->hold(*tensor);
      } catch (const std::bad_alloc&) {
        // Given back (the exporter's claim drops), and said so: never lost without a word. The
        // sentence allocates too: out of memory again, the shorter refusal goes.
        try {
          return make_unexpected(ErrorCode::kResourceExhausted,
                                 std::string(kWho) + ": out of host memory holding export " +
                                     std::to_string(descriptor->export_id) +
                                     " for its readiness; it was given back");
        } catch (const std::bad_alloc&) {
          return make_unexpected(detail::out_of_memory(kWho));
        }
      }
      core_->held_for_readiness();
      // receive(0) reads what is there once: an exporter that publishes faster than this reads
      // must not keep the call here past its time.
      last_pass = deadline.remaining_ms() == 0;
      continue;
    }
    return std::optional<Tensor>(std::move(*tensor));
  }
}

expected<void, Error> Importer::poll() {
  const holoscan::detail::CallUnderWay call(detail::calls_of(core_.get()));
  if (core_ == nullptr) {
    return make_unexpected(detail::importer_moved_from());
  }
  if (call.ending()) {
    return make_unexpected(detail::importer_ending(*core_));
  }
  return core_->flush();
}

// The queries are counted too: the destructor must not free what they read (unready_).
int Importer::fd() const noexcept {
  const holoscan::detail::CallUnderWay call(detail::calls_of(core_.get()));
  return core_ != nullptr ? core_->fd() : -1;
}
std::size_t Importer::outstanding() const noexcept {
  const holoscan::detail::CallUnderWay call(detail::calls_of(core_.get()));
  return core_ != nullptr ? core_->outstanding() : 0;
}
std::size_t Importer::awaiting_readiness() const noexcept {
  const holoscan::detail::CallUnderWay call(detail::calls_of(core_.get()));
  return unready_ != nullptr ? unready_->size() : 0;
}
std::size_t Importer::queued_releases() const noexcept {
  const holoscan::detail::CallUnderWay call(detail::calls_of(core_.get()));
  return core_ != nullptr ? core_->queued_releases() : 0;
}
std::size_t Importer::cached_mappings() const noexcept {
  const holoscan::detail::CallUnderWay call(detail::calls_of(core_.get()));
  return core_ != nullptr ? core_->cached_mappings() : 0;
}
ImporterStats Importer::stats() const noexcept {
  const holoscan::detail::CallUnderWay call(detail::calls_of(core_.get()));
  return core_ != nullptr ? core_->stats() : ImporterStats{};
}

}  // namespace holoscan::ipc
