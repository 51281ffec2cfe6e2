// Exporter: publishes exports to peers and keeps their claims in an ExportLedger until each
// importer's release event has completed, or the importer has exited. Claims are dropped outside
// the exporter's lock (a drop may give a pool block back or run a producer's deleter).
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <iterator>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "calls_under_way.hpp"
#include "holoscan/ipc/exporter.hpp"
#include "holoscan/ipc/liveness.hpp"
#include "ipc/cuda/ipc_opened_event.hpp"
#include "ipc/export/ipc_sent_fds.hpp"
#include "ipc/ipc_error.hpp"
#include "ipc/transport/ipc_handshake.hpp"
#include "keep_until_exit.hpp"

namespace holoscan::ipc {
namespace {

constexpr const char* kWho = "ipc exporter";

// Messages read from one peer in one poll(): a flooding peer cannot keep poll() from returning.
constexpr int kMaxMessagesPerPoll = 4096;

// The release event of one claim, opened from the importer's handle (shared: importers reuse
// their events, so one opened event may serve several claims).
class IpcReleaseEvent final : public ReleaseEvent {
 public:
  explicit IpcReleaseEvent(std::shared_ptr<holoscan::detail::OpenedEvent> event) noexcept
      : event_(std::move(event)) {}
  bool completed() noexcept override { return event_->completed(); }

 private:
  std::shared_ptr<holoscan::detail::OpenedEvent> event_;
};

// An Exporter moved from has no state: its calls are refused rather than read through none.
Error moved_from() noexcept {
  try {
    return detail::invalid_argument(kWho, "this Exporter was moved from");
  } catch (const std::bad_alloc&) {
    return detail::out_of_memory(kWho);
  }
}

// Every public call counts itself while it runs (CallUnderWay), so that the destructor can end
// it and wait for it; the queries too, which read the state it frees. (A template: the state's
// type is the Exporter's private one.)
template <class State>
holoscan::detail::CallsUnderWay* calls_of(const std::unique_ptr<State>& state) noexcept {
  return state != nullptr ? &state->calls : nullptr;
}

// A call woken, or begun, while the Exporter's destructor (or a move-assignment over it) runs.
Error ending() noexcept {
  try {
    return Error{ErrorCode::kClosed, std::string(kWho) + ": the exporter is being destroyed", 0};
  } catch (const std::bad_alloc&) {
    return detail::out_of_memory(kWho);
  }
}

// Sends `message` with `fd` (when not -1) lent: the descriptor belongs to the export (or the pool
// behind it), so it is never closed here, whatever happens.
expected<void, Error> send_lent(Channel& channel, Publish& message, int fd) noexcept {
  struct Lent {
    UniqueFd& fd;
    ~Lent() { (void)fd.release(); }
  } lent{message.fd};
  message.fd = UniqueFd(fd);
  return channel.send(message, 0);  // never throws, never waits
}

}  // namespace

struct Exporter::State {
  // What a Release needs to know of its export.
  struct Sent {
    int device = 0;                // where its release event is opened
    std::uint64_t allocation = 0;  // kPosixFd: whose fd a refusal makes this peer need again
    // Released with `event`, which could not be opened yet for want of memory: the claim stays
    // unreleased in the ledger (nothing is freed early) and the event is opened at a later poll.
    bool awaiting_event = false;
    holoscan::detail::IpcHandleBytes event{};
  };
  struct Peer {
    Channel channel;
    std::unique_ptr<PeerLiveness> liveness;  // the Hello's process; handed to the ledger at close
    // A duplicate of liveness's descriptor, in the epoll set until the peer is forgotten, so that
    // fd() wakes at its exit after a hang-up too. The Exporter's own, taken out of the set before
    // it is closed: a close alone would leave it there while a forked child holds a copy, and an
    // exited peer's pidfd would keep fd() readable for good.
    UniqueFd watched_pidfd;
    holoscan::detail::OpenedEventCache release_events;
    std::unordered_map<std::uint64_t, Sent> exports;  // unreleased export id -> its facts
    detail::SentFds fds;  // per connection: a new one (a reconnect too) starts empty
    bool closed = false;
    std::size_t awaiting_events = 0;  // exports with awaiting_event set
  };

  mutable std::mutex mutex;
  ExportLedger ledger;
  UniqueFd epoll;
  std::unordered_map<PeerId, Peer> peers;
  PeerId next_peer = 1;
  std::uint64_t next_export = 1;
  ExporterStats stats;
  std::uint64_t early_ignored_releases = 0;  // ignored before the ledger saw their claim released
  std::shared_ptr<std::atomic<bool>> abandoned = std::make_shared<std::atomic<bool>>(false);
  // The process that made this exporter: a child forked without exec shares its sockets, and the
  // Releases queued there are the parent's to read.
  const pid_t owner = ::getpid();
  holoscan::detail::CallsUnderWay calls;  // the public calls under way, which the destructor ends
  std::vector<int> greeting;    // channels of add_peer() calls awaiting their Hello (under mutex)

  // Watches `socket` and `pidfd` for peer `id` through the epoll descriptor.
  expected<void, Error> watch(PeerId id, int socket, int pidfd) {
    epoll_event interest{};
    interest.events = EPOLLIN;
    interest.data.u64 = id;
    if (::epoll_ctl(epoll.get(), EPOLL_CTL_ADD, socket, &interest) != 0) {
      return make_unexpected(detail::system_error(kWho, "epoll_ctl", errno));
    }
    if (::epoll_ctl(epoll.get(), EPOLL_CTL_ADD, pidfd, &interest) != 0) {
      const int err = errno;
      unwatch(socket, -1);
      return make_unexpected(detail::system_error(kWho, "epoll_ctl", err));
    }
    return {};
  }

  void unwatch(int socket, int pidfd) noexcept {
    for (int fd : {socket, pidfd}) {
      if (fd >= 0) {
        (void)::epoll_ctl(epoll.get(), EPOLL_CTL_DEL, fd, nullptr);
      }
    }
  }

  // The peer will send nothing more: its channel hung up, or its process exited (another process
  // may still hold the socket). Its claims drop as the ledger decides, by its process's exit. The
  // pidfd stays watched, so that an exit after the hang-up still makes fd() readable, until the
  // peer is forgotten (poll()).
  void close_peer(PeerId id, Peer& peer) noexcept {
    peer.closed = true;
    unwatch(peer.channel.fd(), -1);
    ledger.on_peer_closed(id, std::move(peer.liveness));
  }

  void take_release(PeerId id, Peer& peer, const Release& release) {
    ++stats.releases;
    const auto sent = peer.exports.find(release.export_id);
    if (sent != peer.exports.end() && sent->second.awaiting_event) {
      ++early_ignored_releases;  // released already (its event waits to be opened): changes nothing
      return;
    }
    if (sent != peer.exports.end() && release.refused) {
      // The peer holds no mapping of the allocation now: its next export carries the fd again.
      ++stats.refused_exports;
      peer.fds.refused(sent->second.allocation, release.export_id);
    }
    if (sent == peer.exports.end() || !release.has_event) {
      if (sent != peer.exports.end()) {
        peer.exports.erase(sent);
      }
      ledger.on_release(id, release.export_id, nullptr);  // counts an unknown id as ignored
      return;
    }
    sent->second.event = release.event;
    if (!release_with_event(id, peer, sent)) {
      sent->second.awaiting_event = true;
      ++peer.awaiting_events;
    }
  }

  // Hands the release of `sent` to the ledger with its event opened; false, changing nothing, when
  // that is out of host or device memory for now (a claim held until the importer exits would
  // leak while it lives on). An event CUDA refuses to open cannot be checked: the claim stays until
  // the peer exits, and counts as released, so that a later Release for it changes nothing.
  bool release_with_event(PeerId id, Peer& peer,
                          std::unordered_map<std::uint64_t, Sent>::iterator sent) noexcept {
    const std::uint64_t export_id = sent->first;
    try {
      auto event = peer.release_events.open(sent->second.event, sent->second.device);
      if (event) {
        auto checked = std::make_unique<IpcReleaseEvent>(std::move(*event));
        peer.exports.erase(sent);
        ledger.on_release(id, export_id, std::move(checked));
        return true;
      }
      // Out of memory, the heap's or CUDA's, passes: the event is opened again at a later poll.
      if (event.error().code == ErrorCode::kResourceExhausted ||
          event.error().provenance == static_cast<std::uint64_t>(cudaErrorMemoryAllocation)) {
        return false;
      }
    } catch (const std::bad_alloc&) {
      return false;
    }
    peer.exports.erase(sent);
    ++stats.unopenable_events;
    ledger.on_uncheckable_release(id, export_id);
    return true;
  }

  // Opens the release events that were out of memory at their Release.
  void retry_release_events(PeerId id, Peer& peer) noexcept {
    for (auto e = peer.exports.begin(); e != peer.exports.end() && peer.awaiting_events > 0;) {
      const auto next = std::next(e);
      if (e->second.awaiting_event && release_with_event(id, peer, e)) {
        --peer.awaiting_events;
      }
      e = next;
    }
  }

  // Exports `tensor` to `peer` as the next export id: everything that may allocate happens
  // before the claim is added; once it is, the send either delivers the Publish or the claim is
  // withdrawn, so the ledger holds exactly what the peer was sent.
  expected<std::uint64_t, Error> publish(PeerId id, const Tensor& tensor,
                                         const cudaStream_t* stream) {
    const auto found = peers.find(id);
    if (found == peers.end() && (id == 0 || id >= next_peer)) {
      return make_unexpected(ErrorCode::kNotFound,
                             std::string(kWho) + ": no peer " + std::to_string(id));
    }
    // Ids are never reused: a known id that is gone is a peer that closed and was forgotten once
    // its last claim came back.
    if (found == peers.end() || found->second.closed) {
      return make_unexpected(ErrorCode::kClosed, std::string(kWho) + ": peer " +
                                                     std::to_string(id) + " has hung up or exited");
    }
    Peer& target = found->second;
    const std::uint64_t export_id = next_export++;
    auto exported = stream != nullptr ? export_tensor(tensor, export_id, *stream)
                                      : export_tensor(tensor, export_id);
    if (!exported) {
      return make_unexpected(std::move(exported.error()));
    }
    auto bytes = encode(exported->descriptor());
    if (!bytes) {
      return make_unexpected(std::move(bytes.error()));
    }
    Publish message;
    message.descriptor = std::move(*bytes);
    const TensorDescriptor& d = exported->descriptor();
    const bool fd_kind = d.handle_kind == MemoryHandleKind::kPosixFd;
    const std::uint64_t allocation = fd_kind ? d.allocation_id : 0;
    const detail::SentFds::Plan plan =
        fd_kind ? target.fds.plan(allocation) : detail::SentFds::Plan{false, 0};
    message.forget_allocation = plan.forget;
    auto held = std::make_shared<ExportedTensor>(std::move(*exported));
    ExportLedger::DropClaim drop = [held, gone = abandoned]() mutable {
      if (gone->load(std::memory_order_acquire)) {
        // Its exporter went away while a live peer might still read it: kept, never freed.
        holoscan::detail::keep_until_exit(std::move(held));
      }
      held.reset();
    };
    auto facts = target.exports.try_emplace(export_id, Sent{held->device(), allocation}).first;
    if (auto added = ledger.add(id, export_id, std::move(drop)); !added) {
      target.exports.erase(facts);
      return make_unexpected(std::move(added.error()));
    }
    if (auto sent = send_lent(target.channel, message, plan.attach_fd ? held->fd() : -1); !sent) {
      // Never seen by the peer (nor its fd, nor its forget_allocation): the claim leaves the
      // ledger now, and what the peer holds is as before.
      target.exports.erase(facts);
      if (ExportLedger::DropClaim claim = ledger.withdraw(id, export_id)) {
        claim();  // the caller's tensor still holds the memory: nothing is freed under the lock
      }
      return make_unexpected(std::move(sent.error()));
    }
    target.fds.sent(allocation, plan, export_id);
    ++stats.published;
    stats.fds_sent += plan.attach_fd ? 1 : 0;
    return export_id;
  }

  // The Exporter is going: marks it so, wakes the add_peer() calls waiting for a Hello (their
  // channels shut down, the wait ends at once) and waits until every call under way returned.
  // Not in a forked child's copy, whose shutdown would end the parent's Hello exchanges too.
  void end_calls() noexcept {
    calls.end();
    if (::getpid() == owner) {
      std::lock_guard<std::mutex> lock(mutex);
      for (const int fd : greeting) {
        (void)::shutdown(fd, SHUT_RDWR);
      }
    }
    calls.wait();
  }

  // add_peer(), but out of memory throws, having undone its epoll watch (the caller's channel
  // then closes as it goes out of scope).
  expected<PeerId, Error> add_peer(Channel& channel, int hello_timeout_ms) {
    // Listed while its Hello is awaited, so that the Exporter's end can wake it: under the lock
    // that end_calls() takes after marking the end, so that either it sees this channel or this
    // call sees the end.
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (calls.ending()) {
        return make_unexpected(ending());
      }
      greeting.push_back(channel.fd());
    }
    // Unlisted as soon as the Hello exchange returns, while the channel is still the caller's
    // (open): once it moves into a peer, a poll() may close it and its number be reused, which
    // the end would then shut down.
    struct Unlist {
      State& state;
      int fd;
      ~Unlist() {
        std::lock_guard<std::mutex> lock(state.mutex);
        const auto listed = std::find(state.greeting.begin(), state.greeting.end(), fd);
        if (listed != state.greeting.end()) {
          state.greeting.erase(listed);
        }
      }
    };
    auto hello = [&] {
      const Unlist unlist{*this, channel.fd()};
      return detail::exchange_hello(channel, hello_timeout_ms, kWho, PeerRole::kExporter);
    }();
    if (calls.ending()) {  // nothing after the Hello waits: a later end just waits for this call
      return make_unexpected(ending());
    }
    if (!hello) {
      return make_unexpected(std::move(hello.error()));
    }
    // The claims follow the process that proved it speaks on the channel (its Hello's pidfd),
    // the one that maps the memory: not whoever made the socket, which may be a launcher.
    UniqueFd watched_pidfd(::fcntl(hello->process.get(), F_DUPFD_CLOEXEC, 0));
    if (!watched_pidfd.valid()) {
      return make_unexpected(detail::system_error(kWho, "fcntl(F_DUPFD_CLOEXEC)", errno));
    }
    const int pidfd = watched_pidfd.get();
    auto liveness = watch_pidfd(std::move(hello->process));
    if (!liveness) {
      return make_unexpected(std::move(liveness.error()));
    }
    // Everything that may allocate comes before the watch, and the map's node, allocated last,
    // leaves `peer` whole when it cannot be: the watch is undone while its descriptors are still
    // open (once closed, the removal would fail, and a registration whose socket lives on in
    // another process would keep fd() readable for good).
    Peer peer{
        std::move(channel), std::move(*liveness), std::move(watched_pidfd), {}, {}, {}, false, 0};
    std::lock_guard<std::mutex> lock(mutex);
    peers.reserve(peers.size() + 1);  // no rehash, and so no other allocation, in the emplace
    const PeerId id = next_peer++;
    if (auto watched = watch(id, peer.channel.fd(), pidfd); !watched) {
      return make_unexpected(std::move(watched.error()));
    }
    try {
      peers.emplace(id, std::move(peer));
    } catch (const std::bad_alloc&) {
      unwatch(peer.channel.fd(), pidfd);
      throw;
    }
    return id;
  }

  // Exporter::poll(): reads what every peer sent, drops the claims whose time has come, and
  // forgets the closed peers that hold none.
  std::size_t poll() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      for (auto& [id, peer] : peers) {
        if (peer.awaiting_events > 0) {
          retry_release_events(id, peer);  // before new Releases: a duplicate finds it released
        }
        if (!peer.closed) {
          drain(id, peer);
        }
        if (!peer.closed && peer.liveness->exited()) {
          close_peer(id, peer);  // no end-of-file needed: a launcher may hold its socket
        }
      }
    }
    const std::size_t dropped = ledger.poll();
    // A drop that forked leaves the child a copy of the mutex that another of the parent's
    // threads may hold for ever: the child's copy of this call ends here.
    if (::getpid() != owner) {
      return dropped;
    }
    std::lock_guard<std::mutex> lock(mutex);
    stats.dropped += dropped;
    for (auto p = peers.begin(); p != peers.end();) {
      if (p->second.closed && ledger.held(p->first) == 0) {
        unwatch(-1, p->second.watched_pidfd.get());  // out of the set, then closed with the peer
        p = peers.erase(p);
      } else {
        ++p;
      }
    }
    return dropped;
  }

  void drain(PeerId id, Peer& peer) {
    for (int i = 0; i < kMaxMessagesPerPoll && !peer.closed; ++i) {
      auto received = peer.channel.receive(0);
      if (!received) {
        const ErrorCode code = received.error().code;
        // A malformed frame, out of memory after the read, or a Hello whose proof failed
        // (kPermissionDenied): the frame was consumed; the channel is still usable.
        if (code == ErrorCode::kInvalidArgument || code == ErrorCode::kIncompatible ||
            code == ErrorCode::kResourceExhausted || code == ErrorCode::kPermissionDenied) {
          ++stats.refused_messages;
          continue;
        }
        close_peer(id, peer);  // end-of-file, or a socket that can no longer be read
        return;
      }
      if (!*received) {
        return;
      }
      if (const auto* release = std::get_if<Release>(&**received)) {
        take_release(id, peer, *release);
      } else {
        ++stats.refused_messages;  // an importer sends nothing but Release after its Hello
      }
    }
  }
};

Exporter::Exporter(std::unique_ptr<State> state) noexcept : state_(std::move(state)) {}
Exporter::Exporter(Exporter&& other) noexcept = default;

Exporter& Exporter::operator=(Exporter&& other) noexcept {
  if (this != &other) {
    if (state_ != nullptr) {
      state_->end_calls();  // calls under way read state_, which moves out below
    }
    Exporter old(std::move(*this));
    state_ = std::move(other.state_);
  }
  return *this;
}

Exporter::~Exporter() {
  if (state_ == nullptr) {
    return;
  }
  state_->end_calls();  // calls under way on other threads read this object: ended first
  try {
    // Claims of exited peers, and releases done, drop as usual; not in a forked child's copy,
    // whose reads would take the parent's Releases off the shared sockets (the parent would
    // hold those claims, and their pool blocks, until the importers exit).
    if (::getpid() == state_->owner) {
      (void)state_->poll();
    }
  } catch (...) {
    // A throwing drop: the rest are still kept below.
  }
  // What is left may still be read by a live peer: the ledger's destructor hands it over to
  // keep_until_exit instead of freeing it.
  state_->abandoned->store(true, std::memory_order_release);
}

expected<Exporter, Error> Exporter::create() {
  std::unique_ptr<State> state;
  try {
    state = std::make_unique<State>();
  } catch (const std::bad_alloc&) {
    return make_unexpected(ErrorCode::kResourceExhausted, std::string(kWho) + ": out of memory");
  }
  state->epoll = UniqueFd(::epoll_create1(EPOLL_CLOEXEC));
  if (!state->epoll.valid()) {
    return make_unexpected(detail::system_error(kWho, "epoll_create1", errno));
  }
  return Exporter(std::move(state));
}

expected<PeerId, Error> Exporter::add_peer(Channel channel, int hello_timeout_ms) {
  const holoscan::detail::CallUnderWay call(calls_of(state_));
  if (state_ == nullptr) {
    return make_unexpected(moved_from());
  }
  try {
    return state_->add_peer(channel, hello_timeout_ms);
  } catch (const std::bad_alloc&) {
    // Nothing stays registered (add_peer_or_throw undoes its epoll watch itself) and the channel
    // closes here, as on any refusal.
    return make_unexpected(detail::out_of_memory(kWho));
  }
}

expected<std::uint64_t, Error> Exporter::publish(PeerId peer, const Tensor& tensor) {
  return publish_on(peer, tensor, nullptr);
}

expected<std::uint64_t, Error> Exporter::publish(PeerId peer, const Tensor& tensor,
                                                 cudaStream_t stream) {
  return publish_on(peer, tensor, &stream);
}

expected<std::uint64_t, Error> Exporter::publish_on(PeerId peer, const Tensor& tensor,
                                                    const cudaStream_t* stream) {
  const holoscan::detail::CallUnderWay call(calls_of(state_));
  if (state_ == nullptr) {
    return make_unexpected(moved_from());
  }
  if (call.ending()) {
    return make_unexpected(ending());
  }
  State& s = *state_;
  std::lock_guard<std::mutex> lock(s.mutex);
  try {
    return s.publish(peer, tensor, stream);
  } catch (const std::bad_alloc&) {
    // Thrown before the claim was added (publish() withdraws it itself after that), and every
    // object made so far is destroyed here: the caller's tensor still holds the memory, so
    // nothing is freed under the lock.
    return make_unexpected(detail::out_of_memory(kWho));
  }
}

expected<std::size_t, Error> Exporter::poll() {
  const holoscan::detail::CallUnderWay call(calls_of(state_));
  if (state_ == nullptr) {
    return make_unexpected(moved_from());
  }
  if (call.ending()) {
    return make_unexpected(ending());
  }
  return state_->poll();
}

int Exporter::fd() const noexcept {
  const holoscan::detail::CallUnderWay call(calls_of(state_));
  return state_ != nullptr ? state_->epoll.get() : -1;
}

std::size_t Exporter::held() const noexcept {
  const holoscan::detail::CallUnderWay call(calls_of(state_));
  return state_ != nullptr ? state_->ledger.held() : 0;
}

std::size_t Exporter::held(PeerId peer) const noexcept {
  const holoscan::detail::CallUnderWay call(calls_of(state_));
  return state_ != nullptr ? state_->ledger.held(peer) : 0;
}

bool Exporter::connected(PeerId peer) const noexcept {
  const holoscan::detail::CallUnderWay call(calls_of(state_));
  if (state_ == nullptr) {
    return false;
  }
  std::lock_guard<std::mutex> lock(state_->mutex);
  const auto found = state_->peers.find(peer);
  return found != state_->peers.end() && !found->second.closed;
}

ExporterStats Exporter::stats() const noexcept {
  const holoscan::detail::CallUnderWay call(calls_of(state_));
  if (state_ == nullptr) {
    return {};
  }
  std::lock_guard<std::mutex> lock(state_->mutex);
  ExporterStats stats = state_->stats;
  stats.ignored_releases = state_->ledger.ignored_releases() + state_->early_ignored_releases;
  return stats;
}

}  // namespace holoscan::ipc
