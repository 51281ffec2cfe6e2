// ExportLedger. Claims are keyed by (peer, export id), so a peer can only ever give back what was
// published to it. Event and liveness queries run under the ledger's lock (they never block);
// claims are dropped, and events and watches destroyed, after it is released, because a drop may
// run a producer's deleter or re-enter the library.
#include <unistd.h>

#include <exception>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "holoscan/ipc/claims.hpp"
#include "ipc/export/closed_peers.hpp"
#include "ipc/ipc_error.hpp"
#include "keep_until_exit.hpp"

namespace holoscan::ipc {
namespace {

struct Claim {
  ExportLedger::DropClaim drop;
  bool released = false;
  bool uncheckable = false;             // released with an event that cannot be queried
  std::unique_ptr<ReleaseEvent> event;  // null after a release without one

  // Whether the peer is done with the export by its own word, its GPU work included.
  bool done() const noexcept { return released && !uncheckable && (!event || event->completed()); }
};

struct Peer {
  std::unordered_map<std::uint64_t, Claim> claims;
  bool closed = false;
  bool exited = false;
  std::unique_ptr<PeerLiveness> liveness;
};

// What poll() and the destructor take out under the lock and finish outside it.
struct Retired {
  std::vector<Claim> claims;
  std::vector<std::unique_ptr<PeerLiveness>> watches;
};

// Runs `claim`'s drop; what it throws is returned.
std::exception_ptr run_drop(Claim& claim) noexcept {
  try {
    if (claim.drop) {
      claim.drop();
    }
  } catch (...) {
    return std::current_exception();
  }
  return nullptr;
}

// Runs every drop even when one throws, so that one bad drop leaks no other claim. A drop that
// forked (a producer's deleter) leaves the child a copy of the rest, which the parent drops
// itself: the child keeps its copies until it exits, so that no deleter runs twice.
std::exception_ptr run_drops(std::vector<Claim>& claims, pid_t owner) noexcept {
  std::exception_ptr first;
  for (std::size_t i = 0; i < claims.size(); ++i) {
    if (::getpid() != owner) {
      for (; i < claims.size(); ++i) {
        holoscan::detail::keep_until_exit(std::move(claims[i].drop));
      }
      break;
    }
    std::exception_ptr failure = run_drop(claims[i]);
    if (!first) {
      first = std::move(failure);
    }
  }
  return first;
}

Error refused(const std::string& why) { return detail::invalid_argument("ipc ledger", why); }

}  // namespace

struct ExportLedger::State {
  const pid_t owner = ::getpid();  // the process whose drops these are (run_drops)
  mutable std::mutex mutex;
  std::unordered_map<PeerId, Peer> peers;
  detail::ClosedPeers closed;  // every peer that hung up, also once its entry above is gone
  std::size_t held = 0;
  std::uint64_t ignored_releases = 0;

  // The claim `peer` holds for `export_id` and has not released; null (counted as an ignored
  // release) for anything else.
  Claim* held_claim(PeerId peer, std::uint64_t export_id) noexcept {
    const auto p = peers.find(peer);
    if (p != peers.end()) {
      const auto c = p->second.claims.find(export_id);
      if (c != p->second.claims.end() && !c->second.released) {
        return &c->second;
      }
    }
    ++ignored_releases;
    return nullptr;
  }

  // Moves the claims whose time has come, and the watches of peers left with none, to `retired`.
  // Allocates: a claim leaves its peer only once it is in `retired`.
  void retire(Retired& retired) {
    for (auto p = peers.begin(); p != peers.end();) {
      Peer& peer = p->second;
      if (peer.closed && !peer.exited && !peer.claims.empty()) {
        peer.exited = peer.liveness->exited();
      }
      for (auto c = peer.claims.begin(); c != peer.claims.end();) {
        Claim& claim = c->second;
        if (peer.exited || claim.done()) {
          retired.claims.push_back(std::move(claim));
          c = peer.claims.erase(c);
          --held;
        } else {
          ++c;
        }
      }
      if (peer.closed && peer.claims.empty()) {
        retired.watches.push_back(std::move(peer.liveness));
        p = peers.erase(p);
      } else {
        ++p;
      }
    }
  }
};

ExportLedger::ExportLedger() : state_(std::make_unique<State>()) {}

ExportLedger::~ExportLedger() {
  // Dropped where they are, nothing allocated: a claim destroyed without its drop would free
  // memory a live peer may still read (the exporter's drops keep it instead).
  for (auto& [id, peer] : state_->peers) {
    for (auto& [export_id, claim] : peer.claims) {
      (void)run_drop(claim);  // a throwing drop is swallowed here: nothing escapes a destructor
    }
  }
}

expected<void, Error> ExportLedger::add(PeerId peer, std::uint64_t export_id, DropClaim drop) {
  Error error;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    try {
      // A peer that hung up is refused for good: its entry goes once its claims have dropped,
      // and a claim added after that would never be dropped before the ledger's end.
      const auto known = state_->peers.find(peer);
      if (state_->closed.contains(peer) ||
          (known != state_->peers.end() && known->second.closed)) {
        error = refused("peer " + std::to_string(peer) + " has hung up");
      } else if (Peer& entry = known != state_->peers.end() ? known->second : state_->peers[peer];
                 entry.claims.count(export_id) != 0) {
        error = refused("export " + std::to_string(export_id) + " is already held for peer " +
                        std::to_string(peer));
      } else {
        // Insert first: should that throw, `drop` is still here to be run below.
        entry.claims.try_emplace(export_id).first->second.drop = std::move(drop);
        ++state_->held;
        return {};
      }
    } catch (const std::bad_alloc&) {
      error = Error{ErrorCode::kResourceExhausted, "ipc ledger: out of memory", 0};
    }
  }
  if (drop) {
    drop();
  }
  return make_unexpected(std::move(error));
}

bool ExportLedger::on_release(PeerId peer, std::uint64_t export_id,
                              std::unique_ptr<ReleaseEvent> event) noexcept {
  std::lock_guard<std::mutex> lock(state_->mutex);
  Claim* claim = state_->held_claim(peer, export_id);
  if (claim == nullptr) {
    return false;  // a parameter outlives the lock_guard, so `event` is destroyed unlocked
  }
  claim->released = true;
  claim->event.swap(event);  // `event` now holds null: nothing is destroyed under the lock
  return true;
}

bool ExportLedger::on_uncheckable_release(PeerId peer, std::uint64_t export_id) noexcept {
  std::lock_guard<std::mutex> lock(state_->mutex);
  Claim* claim = state_->held_claim(peer, export_id);
  if (claim == nullptr) {
    return false;
  }
  claim->released = true;
  claim->uncheckable = true;
  return true;
}

ExportLedger::DropClaim ExportLedger::withdraw(PeerId peer, std::uint64_t export_id) noexcept {
  std::lock_guard<std::mutex> lock(state_->mutex);
  const auto p = state_->peers.find(peer);
  if (p == state_->peers.end()) {
    return {};
  }
  const auto c = p->second.claims.find(export_id);
  if (c == p->second.claims.end() || c->second.released) {
    return {};
  }
  DropClaim drop = std::move(c->second.drop);  // std::function's move never allocates
  p->second.claims.erase(c);
  --state_->held;
  return drop;
}

std::size_t ExportLedger::on_peer_closed(PeerId peer,
                                         std::unique_ptr<PeerLiveness> liveness) noexcept {
  std::lock_guard<std::mutex> lock(state_->mutex);
  try {
    state_->closed.insert(peer);
  } catch (const std::bad_alloc&) {
    // Out of memory: the peer's claims below still drop as they should; only a later add() for
    // this id, which no Exporter makes, would be taken.
  }
  const auto p = state_->peers.find(peer);
  if (p == state_->peers.end()) {
    return 0;
  }
  Peer& entry = p->second;
  if (!entry.closed) {
    entry.closed = true;
    entry.exited = liveness == nullptr;
    entry.liveness.swap(liveness);
  }
  return entry.claims.size();
}

std::size_t ExportLedger::poll() {
  Retired retired;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    try {
      state_->retire(retired);
    } catch (const std::bad_alloc&) {
      // Out of memory: what is retired so far drops below, the rest at the next poll().
    }
  }
  if (std::exception_ptr failure = run_drops(retired.claims, state_->owner)) {
    std::rethrow_exception(failure);
  }
  return retired.claims.size();
}

std::size_t ExportLedger::held() const noexcept {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->held;
}

std::size_t ExportLedger::held(PeerId peer) const noexcept {
  std::lock_guard<std::mutex> lock(state_->mutex);
  const auto p = state_->peers.find(peer);
  return p == state_->peers.end() ? 0 : p->second.claims.size();
}

std::uint64_t ExportLedger::ignored_releases() const noexcept {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->ignored_releases;
}

}  // namespace holoscan::ipc
