// The receiving side. A tensor message's header is checked in UCX's callback; its data stays
// inside UCX (rendezvous descriptor or persistent eager data) until receiver memory is found,
// then UCX copies it there (ucp_am_recv_data_nbx): host to host, or into device memory through
// the CUDA transports. Arrivals are handed out in the order they came, each one confirmed to its
// sender as receive() hands it out; refusals are answered at once.
#include <algorithm>
#include <array>
#include <optional>
#include <string>

#include "keep_until_exit.hpp"
#include "landing_memory.hpp"
#include "remote_writes.hpp"
#include "ucx_error.hpp"
#include "worker_state.hpp"

namespace holoscan::ucx {
namespace {

// A landing UCX ended, at once or later (`in_flight`: through its callback, after UCX started
// it): never throws, so that no landing stays unanswered.
void end_landing(Arrival& arrival, ucs_status_t status, std::size_t length,
                 bool in_flight) noexcept {
  if (status != UCS_OK && in_flight && arrival.peer_writes) {
    // UCX fails such a landing at once when the connection breaks, whatever the peer's copy into
    // this memory still does: no point here follows that copy, so the memory is never reused.
    arrival.state->keep_failed_landing(arrival);
  }
  try {
    arrival.state->on_landed(arrival, status, length);
  } catch (...) {
    // No room to report it: dropped unanswered, so the connection ends (its sender: kClosed).
    arrival.phase = Arrival::Phase::kDropped;
    arrival.tensor = Tensor();
    arrival.state->mark_failed(arrival.state->find(arrival.peer), UCS_ERR_NO_MEMORY,
                               "was closed here: a tensor of it could not be taken", nullptr);
  }
}

void on_landed_callback(void* request, ucs_status_t status, std::size_t length, void* user_data) {
  auto* arrival = static_cast<Arrival*>(user_data);
  ucp_request_free(request);
  arrival->request = nullptr;
  end_landing(*arrival, status, length, true);
}

std::string about(const Arrival& arrival) {
  return "tensor " + std::to_string(arrival.header.sequence) + " from peer " +
         std::to_string(arrival.peer);
}

}  // namespace

ucs_status_t Worker::State::on_tensor_message(const void* header, std::size_t header_length,
                                              void* data, std::size_t length,
                                              const ucp_am_recv_param_t& param) {
  // From a connection this side is closing (disconnect): dropped unanswered, as its later ones
  // are once it is closed; its sender learns kClosed from the close. Refused here, it would reach
  // receive(), which reports nothing more of a disconnected peer.
  if ((param.recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) != 0 && being_closed(param.reply_ep)) {
    return UCS_OK;  // UCX drops the data (a rendezvous sender completes)
  }
  auto arrival = std::make_unique<Arrival>();
  arrival->state = this;
  const auto* bytes = static_cast<const std::uint8_t*>(header);
  Peer* peer =
      (param.recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) != 0 ? find(param.reply_ep) : nullptr;
  const std::uint64_t sequence = peek_sequence(bytes, header_length);
  // The confirmations it carries count even when the tensor itself is refused below.
  if (const AnsweredRun run = peek_answered(bytes, header_length);
      peer != nullptr && run.count != 0) {
    answer_sends(*peer, Ack{run.sequence, ErrorCode::kSuccess, {}, run.count});
  }
  arrival->peer = peer != nullptr ? peer->id : 0;
  arrival->header.sequence = sequence;
  const bool kept =
      (param.recv_attr & (UCP_AM_RECV_ATTR_FLAG_DATA | UCP_AM_RECV_ATTR_FLAG_RNDV)) != 0;
  const PeerArrivals earlier = bound_counts(arrival->peer);
  std::optional<Error> refusal;
  if (peer == nullptr) {
    refusal = Error{ErrorCode::kProtocolError,
                    "ucx receive: a tensor message came without a known reply endpoint", 0};
  } else if (auto decoded = decode_tensor_header(bytes, header_length); !decoded) {
    refusal = std::move(decoded.error());
  } else if (decoded->payload_bytes != length) {
    refusal = Error{ErrorCode::kProtocolError,
                    "ucx tensor header: data of " + std::to_string(length) +
                        " bytes, payload_bytes says " + std::to_string(decoded->payload_bytes),
                    0};
  } else if (length > 0 && !kept) {
    refusal =
        Error{ErrorCode::kFailure, "ucx receive: UCX delivered tensor data without keeping it", 0};
  } else if (earlier.unreceived >= config.max_waiting_per_peer) {
    // Only a peer that ignores its window gets here (a sender's window bounds what it has in
    // flight, and a send ends only once receive() handed it out): refused rather than held.
    refusal = Error{ErrorCode::kBackpressured,
                    "ucx receive: peer " + std::to_string(peer->id) + " already has " +
                        std::to_string(earlier.unreceived) +
                        " tensors waiting to be received (WorkerConfig::max_waiting_per_peer); "
                        "tensor " +
                        std::to_string(sequence) + " refused",
                    0};
  } else {
    arrival->header = *decoded;
    arrival->data = length > 0 ? data : nullptr;
    arrival->length = length;
  }
  if (refusal && !keeps_refusal(earlier.refusals)) {
    answer_refusal(arrival->peer, sequence, *refusal);  // not even made an arrival
    return UCS_OK;  // UCX drops the data (a rendezvous sender completes)
  }
  Arrival& placed = *arrival;
  arrivals.push_back(std::move(arrival));
  if (refusal) {
    refuse(placed, std::move(*refusal), earlier.refusals);
    return UCS_OK;  // UCX drops the data (a rendezvous sender completes)
  }
  return placed.data != nullptr ? UCS_INPROGRESS : UCS_OK;
}

void Worker::State::refuse(Arrival& arrival, Error error) {
  refuse(arrival, std::move(error), bound_counts(arrival.peer).refusals);
}

// The error is the arrival's before anything can fail; a refusal that cannot be queued (out of
// host memory) ends the connection instead, so that the sender learns kClosed. Past the peer's
// refusals kept for receive() (keeps_refusal), it is answered and counted but dropped: accepted
// tensors refused later (too large for the pool, a landing that failed) would otherwise grow the
// list without bound, each freeing its place under the bound for the next.
void Worker::State::refuse(Arrival& arrival, Error error, std::size_t refusals_kept) {
  arrival.phase =
      keeps_refusal(refusals_kept) ? Arrival::Phase::kRefused : Arrival::Phase::kDropped;
  arrival.tensor = Tensor();
  arrival.error = std::move(error);
  answer_refusal(arrival.peer, arrival.header.sequence, arrival.error);
}

// Counted, and answered to a known peer (peer 0: the message named none); a refusal that cannot
// be queued (out of host memory) ends the connection instead, so that the sender learns kClosed.
void Worker::State::answer_refusal(PeerId peer, std::uint64_t sequence,
                                   const Error& error) noexcept {
  ++stats.refused;
  if (peer == 0) {
    return;
  }
  try {
    queue_control(peer, MessageId::kAck, encode(Ack{sequence, error.code, error.message}));
  } catch (...) {
    mark_failed(find(peer), UCS_ERR_NO_MEMORY,
                "was closed here: a refusal to it could not be queued", nullptr);
  }
}

std::size_t Worker::State::connected_peers() const noexcept {
  std::size_t connected = 0;
  for (const auto& [id, peer] : peers) {
    connected += peer.lost ? 0 : 1;
  }
  return connected;
}

// In arrival order; the first arrival that finds the pool exhausted holds back the ones after it.
//
// An arrival that its own peer's unfinished one holds back takes a receive pool block only while
// the blocks left still give every other connected peer one. Such a tensor cannot be handed out
// before its peer's earlier one: were a peer stopped mid-transfer to fill the pool's last blocks
// with them, every other peer's next tensor would wait for memory for as long as it stops.
std::size_t Worker::State::land_arrivals() {
  // Dropped arrivals go first (none has a request with UCX): left to take_arrival(), those of an
  // application that does not call receive() would pile up.
  arrivals.erase(std::remove_if(arrivals.begin(), arrivals.end(),
                                [](const std::unique_ptr<Arrival>& arrival) {
                                  return arrival->phase == Arrival::Phase::kDropped;
                                }),
                 arrivals.end());
  std::size_t started = 0;
  std::size_t in_ucx = 0;  // landings UCX is still moving (they come before waiting ones)
  // Asked once a round, and only where the rule below needs them.
  std::optional<std::size_t> connected;    // peers not lost
  std::optional<std::size_t> free_blocks;  // the pool's
  for (auto it = arrivals.begin(); it != arrivals.end(); ++it) {
    Arrival& arrival = **it;
    if (arrival.phase != Arrival::Phase::kWaitingMemory) {
      in_ucx += arrival.phase == Arrival::Phase::kLanding && arrival.request != nullptr ? 1 : 0;
      continue;
    }
    if (config.receive_pool != nullptr) {
      if (!connected) {
        connected = connected_peers();
      }
      const Peer* own = find(arrival.peer);
      const std::size_t others = *connected - (own != nullptr && !own->lost ? 1 : 0);
      // The cheap test first: with one peer (a stream) there is nobody to leave blocks to.
      if (others > 0 && held_back_by_its_peer(it)) {
        if (!free_blocks) {
          free_blocks = config.receive_pool->available_blocks();
        }
        if (*free_blocks <= others) {
          stats.memory_waits += arrival.counted_wait ? 0 : 1;
          arrival.counted_wait = true;
          arrival.behind_its_peer = true;
          continue;  // the blocks left are for the other peers' next tensors
        }
      }
    }
    arrival.behind_its_peer = false;  // from here it may wait for the pool: waiting() counts it
    auto tensor =
        detail::allocate_landing(arrival.header, config.receive_pool, config.max_receive_bytes);
    if (!tensor && detail::is_pool_exhausted(tensor.error(), config.receive_pool)) {
      stats.memory_waits += arrival.counted_wait ? 0 : 1;
      arrival.counted_wait = true;
      break;
    }
    if (!tensor) {
      // Named before the data goes: out of host memory here, the arrival waits as it was.
      Error error = std::move(tensor.error());
      error.message = "ucx receive of " + about(arrival) + ": " + error.message;
      if (arrival.data != nullptr) {
        ucp_am_data_release(worker.get(), arrival.data);
        arrival.data = nullptr;
      }
      refuse(arrival, std::move(error));
      continue;
    }
    arrival.tensor = std::move(*tensor);
    if (free_blocks && *free_blocks > 0) {
      --*free_blocks;
    }
    ++started;
    if (arrival.length == 0) {
      arrival.phase = Arrival::Phase::kLanded;
      continue;
    }
    ucp_request_param_t params{};
    params.op_attr_mask =
        UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_MEMORY_TYPE;
    params.cb.recv_am = on_landed_callback;
    params.user_data = &arrival;
    params.memory_type = detail::memory_type_of(arrival.tensor);
    if (in_ucx > 0 && config.stream_bandwidth_hint) {
      params.op_attr_mask |= UCP_OP_ATTR_FLAG_MULTI_SEND;  // a stream: see post_ready_sends()
    }
    arrival.phase = Arrival::Phase::kLanding;
    Peer* peer = find(arrival.peer);
    arrival.peer_writes = peer == nullptr || writes_remotely(*peer);
    void* descriptor = arrival.data;
    arrival.data = nullptr;  // UCX owns it from here, whatever happens
    void* request = ucp_am_recv_data_nbx(worker.get(), descriptor, arrival.tensor.data(),
                                         arrival.length, &params);
    if (UCS_PTR_IS_PTR(request)) {
      // UCX may have completed the request inside the call (a rendezvous it could not start, or
      // a fetch done at once), running the callback, which freed it and moved the arrival on.
      if (arrival.phase == Arrival::Phase::kLanding) {
        arrival.request = request;
        ++in_ucx;
      }
    } else {
      end_landing(arrival, UCS_PTR_STATUS(request), arrival.length, false);
    }
  }
  return started;
}

void Worker::State::on_landed(Arrival& arrival, ucs_status_t status, std::size_t length) {
  Peer* peer = find(arrival.peer);
  if (peer == nullptr || peer->lost || detail::is_connection_failure(status)) {
    // The peer is gone (UCX's error callback for it runs in this round): its kClosed follows.
    arrival.phase = Arrival::Phase::kDropped;
    arrival.tensor = Tensor();
    // Unanswered: should UCX not report the endpoint failed, handle_failures ends it.
    defer_failure(peer, status, "was closed here: a tensor of it could not be landed",
                  "ucp_am_recv_data_nbx");
    return;
  }
  if (status == UCS_OK && length == arrival.length) {
    arrival.phase = Arrival::Phase::kLanded;
    return;
  }
  refuse(arrival,
         status != UCS_OK
             ? detail::ucx_error("ucx receive of " + about(arrival), "ucp_am_recv_data_nbx", status)
             : Error{ErrorCode::kProtocolError,
                     "ucx receive of " + about(arrival) + ": " + std::to_string(length) +
                         " bytes landed, " + std::to_string(arrival.length) + " expected",
                     0});
}

// No count can reach the bound while the whole list is shorter: a stream's arrivals (a window's
// worth) are not scanned for every message.
Worker::State::PeerArrivals Worker::State::bound_counts(PeerId peer) const noexcept {
  PeerArrivals counts;
  if (arrivals.size() < config.max_waiting_per_peer) {
    return counts;
  }
  for (const auto& arrival : arrivals) {
    if (arrival->peer != peer) {
      continue;
    }
    switch (arrival->phase) {
      case Arrival::Phase::kWaitingMemory:
      case Arrival::Phase::kLanding:
      case Arrival::Phase::kLanded:
        ++counts.unreceived;
        break;
      case Arrival::Phase::kRefused:
        ++counts.refusals;
        break;
      case Arrival::Phase::kPeerClosed:
      case Arrival::Phase::kDropped:
        break;
    }
  }
  return counts;
}

bool Worker::State::writes_remotely(Peer& peer) noexcept {
  if (!peer.writes_remotely) {
    peer.writes_remotely = detail::peer_may_write_remotely(peer.endpoint);
  }
  return *peer.writes_remotely;
}

void Worker::State::keep_failed_landing(Arrival& arrival) noexcept {
  if (arrival.tensor) {
    holoscan::detail::keep_until_exit(std::move(arrival.tensor));
    ++stats.landings_kept;
  }
}

// Landing ones are dropped when UCX calls back. Landed ones are still handed out after UCX
// reported the connection broken (the tensors a peer delivered before it died), but not when this
// side ended it: their sender is told kClosed, so handing them out would deliver a tensor
// reported failed. A disconnect drops the reports too: receive() says nothing more of the peer.
void Worker::State::drop_arrivals(PeerId peer, Dropping dropping) noexcept {
  for (auto& entry : arrivals) {
    Arrival& arrival = *entry;
    if (arrival.peer != peer) {
      continue;
    }
    switch (arrival.phase) {
      case Arrival::Phase::kWaitingMemory:
        if (arrival.data != nullptr) {
          ucp_am_data_release(worker.get(), arrival.data);
          arrival.data = nullptr;
        }
        arrival.phase = Arrival::Phase::kDropped;
        break;
      case Arrival::Phase::kLanded:
        if (dropping != Dropping::kWaiting) {
          arrival.phase = Arrival::Phase::kDropped;
          arrival.tensor = Tensor();  // its block goes back to the pool now
        }
        break;
      case Arrival::Phase::kRefused:
      case Arrival::Phase::kPeerClosed:
        if (dropping == Dropping::kEverything) {
          arrival.phase = Arrival::Phase::kDropped;
        }
        break;
      case Arrival::Phase::kLanding:
      case Arrival::Phase::kDropped:
        break;
    }
  }
}

// Whether an arrival before `it` from the same peer is still waiting for memory or landing.
bool Worker::State::held_back_by_its_peer(ArrivalList::const_iterator it) const noexcept {
  const PeerId peer = (*it)->peer;
  for (auto before = arrivals.begin(); before != it; ++before) {
    const Arrival& earlier = **before;
    if (earlier.peer == peer && (earlier.phase == Arrival::Phase::kWaitingMemory ||
                                 earlier.phase == Arrival::Phase::kLanding)) {
      return true;
    }
  }
  return false;
}

// The first arrival that may be handed out, in each peer's arrival order: one still waiting for
// memory or landing holds back its own peer's later ones, never another peer's (a sender that
// hangs mid-rendezvous delays only its own tensors). A peer whose connect() has not returned its
// id yet is passed over: the caller could not tell whose tensor it is, and should connect() fail,
// the tensor was never delivered.
//
// One pass: the peers of the arrivals passed over for being in flight are noted as the pass goes
// (nothing here changes a phase), since asking held_back_by_its_peer() of each arrival made every
// call of a stream whose tensors were all landing quadratic in the window. Past a few such peers
// it is asked after all.
std::optional<expected<Received, Error>> Worker::State::take_arrival() {
  std::array<PeerId, 8> held_peers{};  // peers with an arrival in flight before this one
  std::size_t held_count = 0;
  bool held_overflow = false;
  const auto held_back = [&](ArrivalList::const_iterator it, PeerId peer) {
    if (held_overflow) {
      return held_back_by_its_peer(it);
    }
    return std::find(held_peers.begin(), held_peers.begin() + held_count, peer) !=
           held_peers.begin() + held_count;
  };
  for (auto it = arrivals.begin(); it != arrivals.end();) {
    Arrival& arrival = **it;
    if (arrival.phase == Arrival::Phase::kDropped) {
      it = arrivals.erase(it);
      continue;
    }
    const Peer* peer = find(arrival.peer);
    const bool in_flight = arrival.phase == Arrival::Phase::kWaitingMemory ||
                           arrival.phase == Arrival::Phase::kLanding;
    if (in_flight && !held_overflow && !held_back(it, arrival.peer)) {
      if (held_count < held_peers.size()) {
        held_peers[held_count++] = arrival.peer;
      } else {
        held_overflow = true;
      }
    }
    if (in_flight || (peer != nullptr && (peer->connecting || peer->untold != Peer::Untold::kNo)) ||
        held_back(it, arrival.peer)) {
      ++it;
      continue;
    }
    switch (arrival.phase) {
      case Arrival::Phase::kWaitingMemory:
      case Arrival::Phase::kLanding:
      case Arrival::Phase::kDropped:
        ++it;  // passed over above; listed for the compiler's exhaustiveness check
        continue;
      case Arrival::Phase::kLanded: {
        // Confirmed before the tensor leaves the arrival: out of host memory there, it stays to
        // be handed out by the next call rather than going with the exception.
        if (peer != nullptr && !peer->lost) {
          const bool first = controls.empty();
          queue_delivered(arrival.peer, arrival.header.sequence);
          if (first) {
            // It goes out with the next round, which this call may never make (a tensor that had
            // landed is handed out without one): a thread asleep in a wait (accept(), another
            // receive()) or an event loop asleep on fd() is woken to make it, or it would sleep on
            // while a sender with a full window waits for this confirmation.
            announce();
          }
        }
        Received received{arrival.peer, arrival.header.sequence, std::move(arrival.tensor)};
        ++stats.received;
        arrivals.erase(it);
        return expected<Received, Error>(std::move(received));
      }
      case Arrival::Phase::kRefused:
      case Arrival::Phase::kPeerClosed: {
        Error error = std::move(arrival.error);
        arrivals.erase(it);
        return expected<Received, Error>(make_unexpected(std::move(error)));
      }
    }
  }
  return std::nullopt;
}

}  // namespace holoscan::ucx
