// Connections: the listener, connecting, accepting, and what happens when a connection ends. A
// peer is lost exactly once (UCX's error callback, a disconnect, or the worker's end); losing it
// fails its sends in flight and drops its pending arrivals (when the connection is ended here, a
// disconnect or an answer that could not go out, also those that landed and were not handed
// out), and a peer lost otherwise than by disconnect is reported to receive() as kClosed after
// everything it delivered.
#include <arpa/inet.h>
#include <netdb.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <utility>

#include "keep_until_exit.hpp"
#include "ucx_error.hpp"
#include "worker_state.hpp"

namespace holoscan::ucx {
namespace {

std::string describe(const sockaddr_storage& address) {
  char host[INET6_ADDRSTRLEN] = "?";
  std::uint16_t port = 0;
  if (address.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&address);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    port = ntohs(in->sin_port);
  } else if (address.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&address);
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
    port = ntohs(in6->sin6_port);
  }
  return std::string(host) + ":" + std::to_string(port);
}

void on_connection_request(ucp_conn_request_h request, void* arg) {
  auto* state = static_cast<Worker::State*>(arg);
  try {
    state->connection_requests.push_back(request);
  } catch (...) {
    (void)ucp_listener_reject(state->listener, request);
  }
}

void on_endpoint_error(void* arg, ucp_ep_h endpoint, ucs_status_t status) {
  auto* state = static_cast<Worker::State*>(arg);
  Peer* peer = state->find(endpoint);
  if (peer != nullptr) {
    peer->endpoint_failed = true;
  }
  state->mark_failed(peer, status, "is gone", "UCX's endpoint error handler");
}

// Frees the requests of `requests` that UCX completed; whether none is left.
bool free_completed(std::vector<void*>& requests) noexcept {
  for (std::size_t i = 0; i < requests.size();) {
    if (ucp_request_check_status(requests[i]) == UCS_INPROGRESS) {
      ++i;
      continue;
    }
    ucp_request_free(requests[i]);
    requests[i] = requests.back();
    requests.pop_back();
  }
  return requests.empty();
}

// How long a close UCX has not finished is polled for (see Worker::State::closes_polled_until).
constexpr std::chrono::milliseconds kClosePolling{100};
// How long a forced close is polled for: UCX's teardown of its transports needs that progress.
constexpr std::chrono::milliseconds kForcedClosePolling{1000};
// How long an orderly close lets UCX finish what it sends before cutting the peer off: a peer
// alive but not taking its data (stopped, hung, or no longer progressing its worker) would hold
// the sends, and their blocks, for as long as it stalls. The sends end kClosed either way.
constexpr std::chrono::seconds kOrderlyCloseLimit{1};

// Asks UCX to close `endpoint` (by force: cancelling what it still moves); its request, if any.
void* request_close(ucp_ep_h endpoint, bool force) noexcept {
  ucp_request_param_t params{};
  params.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  params.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
  return ucp_ep_close_nbx(endpoint, &params);
}

ucp_ep_params_t endpoint_params(Worker::State* state) {
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_ERR_HANDLER | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
  params.err_mode = UCP_ERR_HANDLING_MODE_PEER;  // a dead peer fails its requests, not us
  params.err_handler.cb = on_endpoint_error;
  params.err_handler.arg = state;
  return params;
}

// The kClosed message of a peer whose connection ends for its recorded failure: what failed, and
// the UCX call that said so with its status, or that this side ran out of host memory.
std::string failure_message(PeerId id, const Peer& peer) {
  std::string message =
      "ucx: peer " + std::to_string(id) + " (" + peer.name + ") " + peer.failure.what + " (";
  if (peer.failure.call != nullptr) {
    message += std::string(peer.failure.call) + ": " + detail::describe_status(peer.failure.status);
  } else {
    message += "out of host memory";
  }
  return message + ")";
}

}  // namespace

expected<SocketAddress, Error> resolve_address(const std::string& who, const std::string& address,
                                               std::uint16_t port, bool passive) {
  // getaddrinfo reads up to the first NUL: "a.example\0b.internal" would reach a.example while
  // the caller (an allow-list, say) saw the whole name.
  if (address.find('\0') != std::string::npos) {
    // Written as "\0", so that the message reads as the caller wrote the address.
    std::string shown = who;
    for (std::size_t at = shown.find('\0'); at != std::string::npos; at = shown.find('\0', at)) {
      shown.replace(at, 1, "\\0");
    }
    return make_unexpected(ErrorCode::kInvalidArgument,
                           shown + ": the address holds a NUL character");
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  const std::string service = std::to_string(port);
  addrinfo* list = nullptr;
  if (int status = getaddrinfo(address.c_str(), service.c_str(), &hints, &list); status != 0) {
    return make_unexpected(ErrorCode::kInvalidArgument,
                           who + ": cannot resolve \"" + address + "\": " + gai_strerror(status));
  }
  SocketAddress resolved;
  const auto length = std::min<std::size_t>(list->ai_addrlen, sizeof(resolved.storage));
  std::memcpy(&resolved.storage, list->ai_addr, length);
  resolved.length = static_cast<socklen_t>(length);
  freeaddrinfo(list);
  return resolved;
}

expected<std::uint16_t, Error> Worker::State::listen_locked(
    const std::string& who, const expected<SocketAddress, Error>& resolved) {
  if (listener != nullptr) {
    return make_unexpected(ErrorCode::kDuplicateName, who + ": this worker already listens");
  }
  if (!resolved) {
    return make_unexpected(resolved.error());
  }
  ucp_listener_params_t params{};
  params.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
  params.sockaddr.addr = resolved->get();
  params.sockaddr.addrlen = resolved->length;
  params.conn_handler.cb = on_connection_request;
  params.conn_handler.arg = this;
  if (ucs_status_t status = ucp_listener_create(worker.get(), &params, &listener);
      status != UCS_OK) {
    listener = nullptr;
    return make_unexpected(detail::ucx_error(who, "ucp_listener_create", status));
  }
  ucp_listener_attr_t attr{};
  attr.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
  if (ucs_status_t status = ucp_listener_query(listener, &attr); status != UCS_OK) {
    // Its port unknown, the listener is of no use to the caller: left up, it would take
    // connections nobody asked for, and a retry would be refused as a second listen().
    ucp_listener_destroy(listener);
    listener = nullptr;
    return make_unexpected(detail::ucx_error(who, "ucp_listener_query", status));
  }
  const auto& bound = attr.sockaddr;
  return bound.ss_family == AF_INET6
             ? ntohs(reinterpret_cast<const sockaddr_in6*>(&bound)->sin6_port)
             : ntohs(reinterpret_cast<const sockaddr_in*>(&bound)->sin_port);
}

expected<PeerId, Error> Worker::State::start_connect(const std::string& name,
                                                     const SocketAddress& resolved) {
  const std::string who = "ucx connect to " + name;
  ucp_ep_params_t params = endpoint_params(this);
  params.field_mask |= UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR;
  params.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
  params.sockaddr.addr = resolved.get();
  params.sockaddr.addrlen = resolved.length;
  ucp_ep_h endpoint = nullptr;
  if (ucs_status_t status = ucp_ep_create(worker.get(), &params, &endpoint); status != UCS_OK) {
    return make_unexpected(detail::ucx_error(who, "ucp_ep_create", status));
  }
  const PeerId id = add_peer(endpoint, name);
  Peer& peer = peers[id];
  peer.connecting = true;
  try {
    const auto hello = encode(Hello{});
    queue_control(id, MessageId::kHello, std::string(hello.begin(), hello.end()));
  } catch (...) {
    // Out of host memory: the connection ends with the next round (nobody was given its id).
    lose_untold_next_round(peer, Peer::Untold::kAbandoned,
                           "was closed here: its Hello could not be queued");
    throw;
  }
  flush_controls();
  return id;
}

// connect() gives the peer's id: what came from it meanwhile, held back by receive(), is due now,
// and whoever sleeps on the worker's behalf (a receive() on another thread, an event loop on
// fd()) is woken to take it. A loss after its Hello is reported after its tensors.
void Worker::State::finish_connect(Peer& peer) {
  if (peer.loss_report) {
    arrivals.push_back(std::move(peer.loss_report));
  }
  peer.connecting = false;
  for (const auto& arrival : arrivals) {
    if (arrival->peer == peer.id) {
      announce();
      return;
    }
  }
}

// A connect() that fails is the only report of that connection: the caller never had its id, so
// nothing of it reaches receive(). What the listener sent meanwhile is dropped unconfirmed (its
// sender learns kClosed as the connection ends).
void Worker::State::abandon_connect(Peer& peer) {
  if (!peer.lost) {
    try {
      lose_peer(peer, Error{ErrorCode::kClosed, "ucx: its connect() failed", 0}, false);
    } catch (...) {
      // Out of host memory: ended by the next round, which drops all of it and reports nothing,
      // so that it is forgotten once nothing of it is left.
      lose_untold_next_round(peer, Peer::Untold::kAbandoned,
                             "was closed here: its connect() failed");
      throw;
    }
  }
  peer.loss_report.reset();
  drop_arrivals(peer.id, Dropping::kEverything);
  peer.connecting = false;
}

// Out of host memory for the Peer, the endpoint UCX made is closed rather than left without one:
// its messages would be refused as of no known connection, and nothing would ever close it.
PeerId Worker::State::add_peer(ucp_ep_h endpoint, std::string name) {
  const PeerId id = next_peer;
  try {
    Peer& peer = peers[id];
    peer.id = id;
    peer.endpoint = endpoint;
    peer.name = std::move(name);
    by_endpoint[endpoint] = id;
  } catch (...) {
    peers.erase(id);
    by_endpoint.erase(endpoint);
    if (void* request = request_close(endpoint, true); UCS_PTR_IS_PTR(request)) {
      ucp_request_free(request);  // released by UCX when it completes
    }
    throw;
  }
  ++next_peer;
  return id;
}

// One request at a time, each left queued until UCX has it: out of host memory, the rest wait for
// the next round rather than being lost (their clients would wait for an answer until their
// timeout, and UCX would keep the requests).
std::size_t Worker::State::accept_connections() {
  std::size_t handled = 0;
  while (!connection_requests.empty()) {
    ucp_conn_request_h request = connection_requests.front();
    ucp_conn_request_attr_t attr{};
    attr.field_mask = UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR;
    std::string name =
        ucp_conn_request_query(request, &attr) == UCS_OK ? describe(attr.client_address) : "?";
    accepted.push_back(next_peer);  // the id add_peer() gives it
    ucp_ep_params_t params = endpoint_params(this);
    params.field_mask |= UCP_EP_PARAM_FIELD_CONN_REQUEST;
    params.conn_request = request;
    ucp_ep_h endpoint = nullptr;
    // The request is consumed either way; when no endpoint comes of it, its client's connect fails.
    const ucs_status_t status = ucp_ep_create(worker.get(), &params, &endpoint);
    connection_requests.erase(connection_requests.begin());
    ++handled;
    if (status != UCS_OK) {
      accepted.pop_back();
      continue;
    }
    try {
      peers[add_peer(endpoint, std::move(name))].accepted = true;
    } catch (...) {
      accepted.pop_back();  // add_peer() closed the endpoint: its client learns kClosed
      throw;
    }
    ++stats.peers_accepted;
  }
  return handled;
}

// The first failure of a peer is the one reported; a peer already lost stays as it was.
void Worker::State::mark_failed(Peer* peer, ucs_status_t status, const char* what,
                                const char* call) noexcept {
  if (peer == nullptr || peer->failure.status != UCS_OK) {
    return;
  }
  peer->failure = PeerFailure{status != UCS_OK ? status : UCS_ERR_NO_MESSAGE, what, call};
  peers_failed = true;
}

void Worker::State::lose_untold_next_round(Peer& peer, Peer::Untold why,
                                           const char* what) noexcept {
  peer.untold = why;
  peer.connecting = false;
  mark_failed(&peer, UCS_ERR_NO_MEMORY, what, nullptr);
  drop_arrivals(peer.id, Dropping::kEverything);  // receive() hands out none of it now
  // No UCX event will say that a round has work: an event loop asleep on fd() must come to it.
  announce();
}

void Worker::State::defer_failure(Peer* peer, ucs_status_t status, const char* what,
                                  const char* call) noexcept {
  if (peer == nullptr || peer->lost || peer->deferred_failure.status != UCS_OK) {
    return;
  }
  peer->deferred_failure = PeerFailure{status != UCS_OK ? status : UCS_ERR_NO_MESSAGE, what, call};
  peer->deferred_failure_round = rounds;
  peers_failed = true;
}

std::size_t Worker::State::handle_failures() {
  if (!peers_failed) {
    return 0;
  }
  peers_failed = false;
  std::size_t handled = 0;
  try {
    for (auto& [id, peer] : peers) {
      if (peer.lost) {
        continue;
      }
      if (peer.failure.status == UCS_OK && peer.deferred_failure.status != UCS_OK) {
        if (peer.deferred_failure_round == rounds) {
          peers_failed = true;  // UCX's endpoint error may still come: decided next round
          continue;
        }
        peer.failure = peer.deferred_failure;
      }
      if (peer.failure.status == UCS_OK) {
        continue;
      }
      lose_peer(peer, Error{ErrorCode::kClosed, failure_message(id, peer), 0}, true);
      ++handled;
      if (peer.untold != Peer::Untold::kDisconnected) {
        ++stats.peers_lost;  // broken (or a connect() abandoned), not disconnected here
      }
    }
  } catch (...) {
    peers_failed = true;  // out of host memory: the peers not yet lost are handled next round
    throw;
  }
  return handled;
}

void Worker::State::lose_peer(Peer& peer, const Error& reason, bool report) {
  // The close's requests are kept (and freed) whatever fails.
  closing.reserve(closing.size() + 1);
  flushing.reserve(flushing.size() + 1);
  if (!peer.endpoint_failed) {
    flush_controls();  // an orderly close still confirms what receive() handed out
  }
  fail_outgoing(peer, reason);
  // What landed is still handed out only when UCX reported the connection broken; when it is
  // ended here, its sender is told kClosed for those tensors too. A loss decided here and left
  // untold (an abandoned connect()'s peer was never given; a disconnect() asked for no report)
  // hands out nothing of the peer.
  const bool untold = peer.untold != Peer::Untold::kNo;
  drop_arrivals(peer.id, untold                 ? Dropping::kEverything
                         : peer.endpoint_failed ? Dropping::kWaiting
                                                : Dropping::kUnhanded);
  if (report && !untold) {
    auto marker = std::make_unique<Arrival>();
    marker->state = this;
    marker->peer = peer.id;
    marker->phase = Arrival::Phase::kPeerClosed;
    marker->error = reason;
    // A peer whose connect() has not returned is reported by it: through receive() only if
    // connect() gives its id after all (its Hello came first).
    if (peer.connecting) {
      peer.loss_report = std::move(marker);
    } else {
      arrivals.push_back(std::move(marker));
    }
  }
  // Lost only once nothing above can fail: out of host memory there, the loss is handled again
  // whole (what ended stays ended), rather than left half done.
  peer.lost = true;
  // A failed endpoint is closed at once. Otherwise (a disconnect, or a connection this worker
  // ends because an answer could not go out) UCX finishes what it sends first, for a while.
  close_endpoint(peer, peer.endpoint_failed);
}

void Worker::State::close_endpoint(Peer& peer, bool force) {
  if (peer.endpoint == nullptr) {
    return;
  }
  by_endpoint.erase(peer.endpoint);
  ucp_ep_h endpoint = std::exchange(peer.endpoint, nullptr);
  if (force) {
    close_now(endpoint, true, kClosePolling);  // already broken: nothing left to tear down
  } else {
    begin_orderly_close(endpoint, peer.id);
  }
}

// The endpoint stays open while UCX finishes the peer's sends and landings and flushes what the
// transports hold, for up to kOrderlyCloseLimit; only then is it closed, in flush mode. A close
// in flush mode asked for at once would wait for a peer that stalls without a time limit (a
// rendezvous send waits for its answer, and the connection manager's disconnect for the peer's),
// and, once asked for, the endpoint cannot be closed again by force. Room in `flushing` is
// reserved by the caller.
void Worker::State::begin_orderly_close(ucp_ep_h endpoint, PeerId peer) noexcept {
  ucp_request_param_t params{};
  void* flush = ucp_ep_flush_nbx(endpoint, &params);
  if (UCS_PTR_IS_ERR(flush)) {
    close_now(endpoint, true, kForcedClosePolling);
    return;
  }
  flushing.push_back(
      OrderlyClose{endpoint, peer, flush, std::chrono::steady_clock::now() + kOrderlyCloseLimit});
  // An event loop asleep on fd() must come to poll it (a connect() abandoned on another thread
  // starts one outside any round).
  announce();
}

// Whether `endpoint` is one an orderly close here is waiting on.
bool Worker::State::being_closed(ucp_ep_h endpoint) const noexcept {
  return std::any_of(flushing.begin(), flushing.end(),
                     [endpoint](const OrderlyClose& close) { return close.endpoint == endpoint; });
}

// Whether UCX still holds a send or a landing of `peer` (one forgotten holds none).
bool Worker::State::requests_pending(PeerId peer) noexcept {
  if (const Peer* found = find(peer); found != nullptr) {
    for (const auto& send : found->outgoing) {
      if (send->request != nullptr) {
        return true;
      }
    }
  }
  return std::any_of(arrivals.begin(), arrivals.end(), [peer](const auto& arrival) {
    return arrival->peer == peer && arrival->request != nullptr;
  });
}

// Closes the endpoints whose sends, landings and flush have finished (in flush mode, which tells
// the peer), and those past their limit (or all, with `force_all`) by force: UCX then cancels
// what they still send or land, and each send or landing ends by its callback as when a
// connection breaks.
std::size_t Worker::State::finish_orderly_closes(bool force_all) {
  std::size_t done = 0;
  const auto now = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < flushing.size();) {
    const OrderlyClose close = flushing[i];
    const ucs_status_t status =
        close.flush == nullptr ? UCS_OK : ucp_request_check_status(close.flush);
    const bool settled = status != UCS_INPROGRESS && !requests_pending(close.peer);
    if (!settled && !force_all && now < close.force_at) {
      ++i;
      continue;
    }
    closing.reserve(closing.size() + 2);  // may throw: nothing changed yet, the next round retries
    if (close.flush != nullptr) {
      closing.push_back(close.flush);  // freed once complete (a forced close cancels it)
    }
    const bool force = !settled || status != UCS_OK;
    close_now(close.endpoint, force, force ? kForcedClosePolling : kClosePolling);
    flushing[i] = flushing.back();
    flushing.pop_back();
    ++done;
  }
  return done;
}

// At the worker's end, out of host memory to keep requests: each left is closed by force and its
// requests are handed back to UCX, which frees them when they complete.
void Worker::State::abandon_orderly_closes() noexcept {
  for (const OrderlyClose& close : flushing) {
    if (close.flush != nullptr) {
      ucp_request_free(close.flush);
    }
    if (void* request = request_close(close.endpoint, true); UCS_PTR_IS_PTR(request)) {
      ucp_request_free(request);
    }
  }
  flushing.clear();
}

// Room in `closing` is reserved by the caller.
void Worker::State::close_now(ucp_ep_h endpoint, bool force,
                              std::chrono::milliseconds polling) noexcept {
  if (void* request = request_close(endpoint, force); UCS_PTR_IS_PTR(request)) {
    closing.push_back(request);
  }
  // Polled for a while (`polling`) even without a request: a forced close of a live connection
  // returns none, and UCX tears its transports down (and the peer learns of it) in its later
  // progress, which no event announces; over tcp that waits for the peer to drain what was under
  // way. An endpoint UCX reported failed needs no such teardown: its polling is short.
  closes_polled_until = std::max(closes_polled_until, std::chrono::steady_clock::now() + polling);
}

bool Worker::State::drain_closing() noexcept {
  const bool sent = finish_sent_controls();
  return free_completed(closing) && sent;
}

bool Worker::State::requests_pending() const noexcept {
  for (const auto& [id, peer] : peers) {
    for (const auto& send : peer.outgoing) {
      if (send->request != nullptr) {
        return true;
      }
    }
  }
  for (const auto& arrival : arrivals) {
    if (arrival->request != nullptr) {
      return true;
    }
  }
  return false;
}

// Progresses until every endpoint closed and every request completed, or `limit` passed; an
// orderly close still flushing then is closed by force.
void Worker::State::settle(std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while ((!drain_closing() || requests_pending() || !flushing.empty()) &&
         std::chrono::steady_clock::now() < deadline) {
    ucp_worker_progress(worker.get());
    (void)finish_orderly_closes(false);
  }
  (void)finish_orderly_closes(true);
}

// A request UCX never completed may still have a copy of its own in flight on the GPU: the memory
// it names is never freed or reused, but kept until the process exits (it is reachable from here).
void Worker::State::keep_unsettled_memory() noexcept {
  for (auto& [id, peer] : peers) {
    for (auto& send : peer.outgoing) {
      if (send->request != nullptr) {
        holoscan::detail::keep_until_exit(std::move(send->claim));
      }
    }
  }
  for (auto& arrival : arrivals) {
    if (arrival->request != nullptr) {
      holoscan::detail::keep_until_exit(std::move(arrival->tensor));
    }
  }
}

// Closes every connection and gives UCX up to two seconds to finish what it was doing; only memory
// of completed requests is let go of with the worker. (What is left cannot be cancelled first:
// ucp_request_cancel acts on tag receives only, and the worker uses active messages.)
void Worker::State::shut_down() noexcept {
  if (worker == nullptr) {
    return;
  }
  try {
    for (ucp_conn_request_h request : connection_requests) {
      (void)ucp_listener_reject(listener, request);
    }
    connection_requests.clear();
    if (listener != nullptr) {
      ucp_listener_destroy(listener);
      listener = nullptr;
    }
    for (auto& [id, peer] : peers) {
      if (!peer.lost) {
        lose_peer(peer, Error{ErrorCode::kClosed, "ucx: the worker was destroyed", 0}, false);
      }
    }
    settle(std::chrono::seconds(2));
  } catch (...) {
    // Out of host memory while closing: what UCX did not finish is kept below.
  }
  abandon_orderly_closes();
  keep_unsettled_memory();
  for (auto& [id, peer] : peers) {
    for (auto& send : peer.outgoing) {
      drop_claim(*send);  // let go of once the mutex is released, not with the peers below
    }
  }
  // Released by UCX when they complete.
  for (void* request : closing) {
    ucp_request_free(request);
  }
  closing.clear();
  for (const SentControl& sent : sending) {
    ucp_request_free(sent.request);
  }
  sending.clear();
  worker.reset();
  peers.clear();
  by_endpoint.clear();
  arrivals.clear();
  context.reset();
}

}  // namespace holoscan::ucx
