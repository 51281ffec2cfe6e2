// The sending side. A send is held until its readiness point passed (and every earlier send to
// the peer went to UCX: a peer sees tensors in send order), then posted as one active message
// whose data is the tensor's own memory. The claim is dropped when UCX reports that it is done
// with the memory; the send ends when, in addition, the peer answered (or the connection broke).
#include <algorithm>
#include <array>
#include <string>

#include "dlpack/dlpack_validate.hpp"  // the core's layout rules (internal)
#include "keep_until_exit.hpp"
#include "landing_memory.hpp"
#include "ucx_error.hpp"
#include "worker_state.hpp"

namespace holoscan::ucx {
namespace {

void on_sent(void* request, ucs_status_t status, void* user_data) {
  auto* send = static_cast<Outgoing*>(user_data);
  ucp_request_free(request);
  send->request = nullptr;
  if (status != UCS_OK && send->peer_reads) {
    // Failed after it was under way, to a peer whose transport reads this side's memory itself
    // (a rendezvous "get": CUDA IPC, RDMA): UCX fails the request as soon as this side sees the
    // connection broken, while the peer's copy out of the block may still run and complete. The
    // block must not be reused under it: kept before on_ucx_done would give it back.
    send->state->keep_failed_send(*send);
  }
  send->state->on_ucx_done(*send, status);  // throws nothing
}

std::string about(const Outgoing& send) {
  return "tensor " + std::to_string(send.sequence) + " to peer " + std::to_string(send.peer);
}

// What a tensor must be to travel: the payload is its memory, as one compact run of bytes.
expected<void, Error> check_sendable(const Tensor& tensor) {
  constexpr const char* kWho = "ucx send: ";
  if (!tensor || (tensor.data() == nullptr && tensor.size() > 0)) {
    return make_unexpected(ErrorCode::kInvalidArgument, std::string(kWho) + "the tensor is empty");
  }
  // Every import and the pool keep these bounds, but a view written by hand into a context need
  // not: header_of() copies the extents into arrays of kMaxWireDims, before the header's own
  // checks run.
  const DLTensor& view = tensor.dl_tensor();
  if (view.ndim < 0 || view.ndim > static_cast<std::int32_t>(kMaxWireDims)) {
    return make_unexpected(ErrorCode::kInvalidArgument,
                           std::string(kWho) + "ndim " + std::to_string(view.ndim) +
                               " is outside [0, " + std::to_string(kMaxWireDims) + "]");
  }
  if (view.ndim > 0 && view.shape == nullptr) {
    return make_unexpected(ErrorCode::kInvalidArgument, std::string(kWho) + "the tensor has " +
                                                            std::to_string(view.ndim) +
                                                            " dimensions and no shape");
  }
  if (!tensor.is_contiguous()) {
    return make_unexpected(
        ErrorCode::kNotImplemented,
        std::string(kWho) + "the tensor is not contiguous (row-major, compact); copy it first");
  }
  if (detail::memory_type_of(tensor) == UCS_MEMORY_TYPE_UNKNOWN) {
    return make_unexpected(ErrorCode::kNotImplemented,
                           std::string(kWho) + "device type " +
                               std::to_string(tensor.device().device_type) +
                               " is not memory UCX moves (CPU, CUDA, CUDA host, CUDA managed)");
  }
  return {};
}

TensorHeader header_of(const Tensor& tensor, std::uint64_t sequence) {
  TensorHeader h;
  h.sequence = sequence;
  h.payload_bytes = static_cast<std::uint64_t>(tensor.nbytes());
  h.dlpack_flags = tensor.flags();
  h.dlpack_version = tensor.version();
  h.dtype = tensor.dtype();
  h.ndim = tensor.ndim();
  const DLTensor& view = tensor.dl_tensor();
  for (std::int32_t i = 0; i < h.ndim; ++i) {
    h.shape[i] = view.shape[i];
  }
  // The payload is compact whatever strides size-1 dims had. The layout rules' own strides
  // saturate where a view written by hand has extents whose product overflows (the header's
  // checks then refuse it).
  holoscan::detail::compact_strides(h.ndim, h.shape.data(), h.strides.data());
  return h;
}

}  // namespace

std::size_t Worker::State::in_flight_locked(const Peer& peer) const noexcept {
  std::size_t count = 0;
  for (const auto& send : peer.outgoing) {
    count += send->ended ? 0 : 1;
  }
  return count;
}

// Moves the send's claim aside, to be dropped once the mutex is released (StateLock): within the
// room its send reserved, so that this never allocates. Were that room missing, the claim is
// dropped here rather than kept: late, a deleter that calls the worker would wait for ever.
void Worker::State::drop_claim(Outgoing& send) noexcept {
  if (!send.claim) {
    return;
  }
  claims_held -= claims_held != 0 ? 1 : 0;
  try {
    dropped_claims.push_back(std::move(send.claim));
  } catch (...) {
    send.claim = holoscan::detail::HeldClaim();
  }
}

void Worker::State::keep_failed_send(Outgoing& send) noexcept {
  if (!send.claim) {
    return;
  }
  claims_held -= claims_held != 0 ? 1 : 0;
  holoscan::detail::keep_until_exit(std::move(send.claim));
  ++stats.sends_kept;
}

StateLock::~StateLock() {
  auto& dropped = state_.dropped_claims;
  if (dropped.empty()) {
    state_.mutex.unlock();
    return;
  }
  // A batch at a time: the list keeps its room (pop_back never shrinks it) and nothing allocates.
  constexpr std::size_t kBatch = 16;
  for (;;) {
    std::array<holoscan::detail::HeldClaim, kBatch> batch;
    std::size_t count = 0;
    while (count < kBatch && !dropped.empty()) {
      batch[count++] = std::move(dropped.back());
      dropped.pop_back();
    }
    const bool more = !dropped.empty();
    state_.mutex.unlock();
    for (std::size_t i = 0; i < count; ++i) {
      // A deleter that forked leaves the child a copy of the rest of the batch, which the parent
      // drops itself: the child keeps its copies, so that no producer's deleter runs twice.
      if (state_.forked_copy()) {
        for (; i < count; ++i) {
          holoscan::detail::keep_until_exit(std::move(batch[i]));
        }
        return;
      }
      batch[i] =
          holoscan::detail::HeldClaim();  // may run a producer's deleter: not under the mutex
    }
    // A deleter that forked leaves the child a copy of the mutex that another of the parent's
    // threads may hold for ever: the child takes it no more (its copy of the worker is refused).
    if (!more || state_.forked_copy()) {
      return;
    }
    state_.mutex.lock();
  }
}

expected<std::uint64_t, Error> Worker::State::send_locked(PeerId id, const Tensor& tensor) {
  Peer* peer = find(id);
  if (peer == nullptr && closed(id)) {
    return make_unexpected(ErrorCode::kClosed,
                           "ucx send: peer " + std::to_string(id) + " is gone (closed)");
  }
  if (peer == nullptr || !peer->handed_out()) {
    return make_unexpected(ErrorCode::kNotFound, "ucx send: no peer " + std::to_string(id));
  }
  if (peer->gone()) {
    return make_unexpected(ErrorCode::kClosed, "ucx send: peer " + std::to_string(id) + " (" +
                                                   peer->name + ") is gone");
  }
  if (in_flight_locked(*peer) >= config.window) {
    return make_unexpected(ErrorCode::kBackpressured, "ucx send: " + std::to_string(config.window) +
                                                          " tensors in flight to peer " +
                                                          std::to_string(id) + " (the window)");
  }
  if (auto sendable = check_sendable(tensor); !sendable) {
    return forward_error(std::move(sendable));
  }
  try {
    dropped_claims.reserve(dropped_claims.size() + claims_held + 1);  // room for this claim
  } catch (...) {
    return make_unexpected(ErrorCode::kResourceExhausted, "ucx send: out of host memory");
  }
  auto send = std::make_unique<Outgoing>();
  send->state = this;
  send->peer = id;
  send->sequence = peer->next_sequence;
  send->claim = holoscan::detail::HeldClaim(tensor.dl_ctx());
  send->payload = tensor.data();
  send->payload_bytes = static_cast<std::size_t>(tensor.nbytes());
  send->memory_type = detail::memory_type_of(tensor);
  auto size = encode(header_of(tensor, send->sequence), send->header.data(), send->header.size());
  if (!size) {
    return forward_error(std::move(size));
  }
  send->header_size = *size;
  // Queued before its readiness is armed: the queue may need memory (a new block now and then),
  // and a refusal after the arm had taken a readiness event and counted a wait for a send that
  // never was. Nothing posts it before post_ready_sends() below; until it is armed, a refusal or
  // an exception from the arm (out of memory for a message, a caller's hook that threw) takes it
  // back out, so that it is never posted before its readiness.
  Outgoing& added = *send;
  peer->outgoing.push_back(std::move(send));
  struct Unqueue {
    std::deque<std::unique_ptr<Outgoing>>& queue;
    bool keep = false;
    ~Unqueue() {
      if (!keep) {
        queue.pop_back();
      }
    }
  } unqueue{peer->outgoing};
  if (tensor.has_readiness_stream_contract()) {
    Tensor armed = tensor;  // the gate waits through a Tensor's own hook
    auto ticket = gate.arm(armed, id);
    if (!ticket) {
      Error error = std::move(ticket.error());
      error.message = "ucx send: " + error.message;
      return make_unexpected(std::move(error));
    }
    added.ticket = *ticket;
    ++stats.readiness_waits;
  }
  unqueue.keep = true;
  ++claims_held;
  ++peer->next_sequence;
  ++stats.sent;
  post_ready_sends();
  if (added.phase == Outgoing::Phase::kHeld) {
    // Held (its readiness, or an earlier send's): only a poll tells when it may go. A thread
    // asleep in a wait of this worker, or an event loop asleep on fd(), decided how to sleep
    // before it was here; woken, it polls (waiting() is not zero).
    announce();
  }
  return peer->next_sequence - 1;
}

// Posts, per peer and in send order, every held send whose readiness passed; the first one still
// waiting holds back the ones after it.
std::size_t Worker::State::post_ready_sends() {
  std::size_t posted = 0;
  for (auto& [id, peer] : peers) {
    std::size_t in_ucx = 0;  // this peer's sends UCX is still moving (all come before held ones)
    // Nothing goes to a peer already known failed (lost by the next round): a send UCX failed
    // there after taking it would keep its block for good where the peer may map it remotely.
    // Asked before each send: one ended at once below may mark its peer failed (out of memory).
    const auto failed = [&peer = peer] {
      return peer.failure.status != UCS_OK || peer.deferred_failure.status != UCS_OK;
    };
    for (std::size_t i = 0; i < peer.outgoing.size() && !peer.lost && !failed(); ++i) {
      Outgoing& send = *peer.outgoing[i];
      if (send.phase != Outgoing::Phase::kHeld) {
        in_ucx += send.phase == Outgoing::Phase::kPosted && send.request != nullptr ? 1 : 0;
        continue;
      }
      if (send.ticket) {
        auto passed = gate.passed(*send.ticket);
        if (passed && !*passed) {
          break;
        }
        gate.release(*send.ticket);
        send.ticket.reset();
        if (!passed) {
          fail_unready(send, passed.error());
          continue;
        }
      }
      ucp_request_param_t params{};
      params.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                            UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_MEMORY_TYPE;
      params.flags = UCP_AM_SEND_FLAG_REPLY;
      params.cb.send = on_sent;
      params.user_data = &send;
      params.memory_type = send.memory_type;
      if (in_ucx > 0 && config.stream_bandwidth_hint) {
        // A stream of tensors: UCX picks its protocols for the bandwidth of several transfers in
        // flight, not for one transfer's latency (as ucx_perftest's bandwidth tests ask).
        params.op_attr_mask |= UCP_OP_ATTR_FLAG_MULTI_SEND;
      }
      send.phase = Outgoing::Phase::kPosted;
      send.peer_reads = writes_remotely(peer);  // asked of UCX once per peer, while it is up
      attach_answers(send);
      void* request = ucp_am_send_nbx(peer.endpoint, static_cast<unsigned>(MessageId::kTensor),
                                      send.header.data(), send.header_size, send.payload,
                                      send.payload_bytes, &params);
      ++posted;
      if (UCS_PTR_IS_PTR(request)) {
        // Unless UCX completed it inside the call: the callback then freed it and released the
        // send.
        if (send.phase == Outgoing::Phase::kPosted) {
          send.request = request;
          ++in_ucx;
        }
      } else {
        on_ucx_done(send, UCS_PTR_STATUS(request));  // done at once, or refused at once
      }
    }
  }
  return posted;
}

// A send whose readiness cannot be known is never posted: it ends with the query's error, or, out
// of host memory for that error, with its peer, whose connection ends here. Its phase leaves
// kHeld first, so that no later round posts it while the producer may still write.
void Worker::State::fail_unready(Outgoing& send, const Error& why) {
  send.phase = Outgoing::Phase::kReleased;
  try {
    send.outcome = make_unexpected(
        Error{why.code, "ucx send of " + about(send) + ": " + why.message, why.provenance});
  } catch (...) {
    mark_failed(find(send.peer), UCS_ERR_NO_MEMORY,
                "was closed here: the outcome of a send to it could not be kept", nullptr);
  }
  on_ucx_done(send, UCS_OK);
}

// A confirmation due to the peer rides in this tensor's header rather than in an Ack of its own
// (the first run queued for the peer; others stay queued). Only at posting: a send held for its
// readiness would hold the answer back too.
void Worker::State::attach_answers(Outgoing& send) noexcept {
  for (auto it = controls.begin(); it != controls.end(); ++it) {
    if (it->peer != send.peer || it->count == 0) {
      continue;
    }
    const AnsweredRun run{it->delivered, it->count};
    if (write_answered(send.header.data(), send.header_size, run)) {
      send.answered = run;
      controls.erase(it);  // moves the later ones down: nothing allocates
    }
    return;
  }
}

// A tensor message UCX could not send may have taken a confirmation with it: the run goes back to
// the queue as an Ack (a second answer, should the first have arrived after all, changes nothing
// at the peer). One that UCX sent counts as carried.
void Worker::State::finish_answers(Outgoing& send, ucs_status_t status) {
  if (send.answered.count == 0) {
    return;
  }
  if (status == UCS_OK) {
    ++stats.answers_carried;
    return;
  }
  if (const Peer* peer = find(send.peer);
      peer == nullptr || peer->lost || peer->endpoint == nullptr) {
    send.answered = AnsweredRun{};  // the connection is gone: nobody to tell
    return;
  }
  Control control{send.peer, MessageId::kAck, {}};
  control.delivered = send.answered.sequence;
  control.count = send.answered.count;
  send.answered = AnsweredRun{};
  controls.push_back(std::move(control));
}

void Worker::State::on_ucx_done(Outgoing& send, ucs_status_t status) {
  send.phase = Outgoing::Phase::kReleased;
  drop_claim(send);  // UCX no longer reads the memory: the pool may reuse it
  try {
    finish_answers(send, status);
    if (status != UCS_OK && !send.outcome) {
      Error error = detail::ucx_error("ucx send of " + about(send), "ucp_am_send_nbx", status);
      send.outcome = make_unexpected(std::move(error));
    }
    end_if_done(send);
  } catch (...) {
    // Out of host memory for the outcome or the result (in UCX's callback, or in a send() that
    // already took the tensor): the send ends with its peer, whose connection ends here so that
    // it does; a peer already lost ended its sends' outcomes before, so the result is made again
    // by a later round.
    mark_failed(find(send.peer), UCS_ERR_NO_MEMORY,
                "was closed here: the outcome of a send to it could not be kept", nullptr);
    unended_sends = true;
  }
}

// Sends that have their outcome and are released but could not be reported (out of host memory
// for the result), ended again; one that still cannot be waits for the next round.
std::size_t Worker::State::end_unended() {
  if (!unended_sends) {
    return 0;
  }
  unended_sends = false;
  std::size_t ended = 0;
  for (auto& [id, peer] : peers) {
    for (auto& send : peer.outgoing) {
      if (send->ended || !send->outcome || send->phase != Outgoing::Phase::kReleased) {
        continue;
      }
      try {
        end_if_done(*send);
        ++ended;
      } catch (...) {
        unended_sends = true;
        return ended;
      }
    }
  }
  return ended;
}

// Ends every send in flight that the Ack names (a run of consecutive sequence numbers, or one
// refused tensor). A name that matches nothing in flight (or a second answer) changes nothing; an
// Ack with such a name is counted in ignored_acks.
void Worker::State::on_ack(ucp_ep_h reply_endpoint, const std::uint8_t* bytes, std::size_t size) {
  if (being_closed(reply_endpoint)) {
    return;  // its sends ended kClosed with the disconnect: nothing left to answer or count
  }
  Peer* peer = find(reply_endpoint);
  auto ack = decode_ack(bytes, size);
  if (peer == nullptr || !ack) {
    ++stats.ignored_acks;
    return;
  }
  answer_sends(*peer, *ack);
}

// The answer of an Ack, or of the run a tensor header carries.
void Worker::State::answer_sends(Peer& peer, const Ack& ack) {
  std::uint64_t answered = 0;
  for (std::size_t i = 0; i < peer.outgoing.size() && answered < ack.count; ++i) {
    Outgoing& send = *peer.outgoing[i];
    if (send.sequence - ack.sequence >= ack.count || send.ended || send.outcome ||
        send.phase == Outgoing::Phase::kHeld) {
      continue;  // unsigned: a sequence before the run wraps to a large offset
    }
    if (ack.code == ErrorCode::kSuccess) {
      send.outcome = expected<void, Error>();
    } else {
      send.outcome = make_unexpected(Error{
          ack.code, "ucx send of " + about(send) + " refused by the peer: " + ack.message, 0});
    }
    ++answered;
    end_if_done(send);
  }
  stats.ignored_acks += answered < ack.count ? 1 : 0;
}

// Sends that UCX still holds end when it calls back (the closed endpoint cancels them); the rest
// end now.
void Worker::State::fail_outgoing(Peer& peer, const Error& reason) {
  for (auto& send : peer.outgoing) {
    if (send->ended) {
      continue;
    }
    if (!send->outcome) {
      send->outcome = make_unexpected(
          Error{ErrorCode::kClosed, "ucx send of " + about(*send) + ": " + reason.message, 0});
    }
    if (send->phase == Outgoing::Phase::kHeld) {
      if (send->ticket) {
        gate.release(*send->ticket);
        send->ticket.reset();
      }
      send->phase = Outgoing::Phase::kReleased;
      drop_claim(*send);
    }
    end_if_done(*send);
  }
}

void Worker::State::end_if_done(Outgoing& send) {
  if (send.ended || !send.outcome || send.phase != Outgoing::Phase::kReleased) {
    return;
  }
  // Room for the result is made before the send counts as ended: out of host memory here, the
  // send stays in flight with its outcome and ends again with its peer (never silently). The
  // outcome is moved, never copied: tl::expected<void, E> copies an error in a noexcept function.
  results.emplace_back();
  SendResult& result = results.back();
  result.peer = send.peer;
  result.sequence = send.sequence;
  result.outcome = std::move(*send.outcome);
  send.ended = true;
  ++(result.outcome ? stats.delivered : stats.failed);
}

// Also forgets the peers that are over: lost, closed, with no send left and nothing left for
// receive() to hand out or report. Kept, every connection that ever ended (a client retrying a
// server that is down makes one per connect()) held its bookkeeping for the worker's life and
// made every round walk it; an id of one forgotten is still answered as a closed peer (ids are
// never reused: see closed()).
void Worker::State::sweep_ended() {
  for (auto p = peers.begin(); p != peers.end();) {
    Peer& peer = p->second;
    auto& list = peer.outgoing;
    while (!list.empty() && list.front()->ended) {
      list.pop_front();
    }
    for (std::size_t i = 0; i < list.size();) {
      if (list[i]->ended) {
        list.erase(list.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
    if (over(peer)) {
      gate.forget(p->first);
      if (peer.accepted) {  // never taken by accept(): a worker that never asks keeps no id
        accepted.erase(std::remove(accepted.begin(), accepted.end(), p->first), accepted.end());
      }
      p = peers.erase(p);
    } else {
      ++p;
    }
  }
}

bool Worker::State::over(const Peer& peer) const noexcept {
  if (!peer.lost || peer.connecting || peer.endpoint != nullptr || !peer.outgoing.empty() ||
      peer.loss_report != nullptr) {
    return false;
  }
  for (const auto& arrival : arrivals) {
    if (arrival->peer == peer.id && arrival->phase != Arrival::Phase::kDropped) {
      return false;  // a tensor or its kClosed still to hand out, or a landing UCX still moves
    }
  }
  return true;
}

bool Worker::State::closed(PeerId id) const noexcept { return id != 0 && id < next_peer; }

}  // namespace holoscan::ucx
