// The protocol's small messages (Ack, Hello) and the active message handlers. Small messages are
// queued by callbacks and sent after the progress round, never from inside UCX's callback; each
// goes as an eager message whose header UCX copies, so nothing of it has to outlive the call.
// Tensors handed out one after the other to the same peer are confirmed by one Ack: a receiver
// that drains a backlog sends one message for all of it, not one per tensor.
#include <algorithm>
#include <string>

#include "worker_state.hpp"

namespace holoscan::ucx {
namespace {

ucp_ep_h reply_endpoint(const ucp_am_recv_param_t* param) {
  return (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) != 0 ? param->reply_ep : nullptr;
}

ucs_status_t tensor_handler(void* arg, const void* header, std::size_t header_length, void* data,
                       std::size_t length, const ucp_am_recv_param_t* param) {
  auto* state = static_cast<Worker::State*>(arg);
  try {
    return state->on_tensor_message(header, header_length, data, length, *param);
  } catch (...) {
    // Out of host memory: the message is dropped unanswered, so its connection ends (its sender
    // learns kClosed for it rather than nothing).
    state->mark_failed(state->find(reply_endpoint(param)), UCS_ERR_NO_MEMORY,
                       "was closed here: a tensor message of it could not be taken", nullptr);
    return UCS_OK;
  }
}

ucs_status_t ack_handler(void* arg, const void* header, std::size_t header_length, void*, std::size_t,
                    const ucp_am_recv_param_t* param) {
  auto* state = static_cast<Worker::State*>(arg);
  try {
    state->on_ack(reply_endpoint(param), static_cast<const std::uint8_t*>(header), header_length);
  } catch (...) {
    // Out of host memory: the answer is lost, so the connection ends (its sends fail kClosed).
    state->mark_failed(state->find(reply_endpoint(param)), UCS_ERR_NO_MEMORY,
                       "was closed here: an answer of it could not be taken", nullptr);
  }
  return UCS_OK;
}

ucs_status_t hello_handler(void* arg, const void* header, std::size_t header_length, void*,
                      std::size_t, const ucp_am_recv_param_t* param) {
  auto* state = static_cast<Worker::State*>(arg);
  try {
    state->on_hello(reply_endpoint(param), static_cast<const std::uint8_t*>(header), header_length);
  } catch (...) {
    // Out of host memory: unanswered, the connecting side would wait until its timeout; the
    // connection ends instead, so that it learns kClosed at once.
    state->mark_failed(state->find(reply_endpoint(param)), UCS_ERR_NO_MEMORY,
                       "was closed here: its Hello could not be taken", nullptr);
  }
  return UCS_OK;
}

}  // namespace

expected<void, Error> Worker::State::register_handlers() {
  const struct {
    MessageId id;
    unsigned flags;
    ucp_am_recv_callback_t callback;
  } handlers[] = {
      // Tensor data stays inside UCX until receiver memory is found for it.
      {MessageId::kTensor, UCP_AM_FLAG_WHOLE_MSG | UCP_AM_FLAG_PERSISTENT_DATA, tensor_handler},
      {MessageId::kAck, UCP_AM_FLAG_WHOLE_MSG, ack_handler},
      {MessageId::kHello, UCP_AM_FLAG_WHOLE_MSG, hello_handler},
  };
  for (const auto& handler : handlers) {
    if (auto set = detail::set_am_handler(worker.get(), static_cast<unsigned>(handler.id),
                                          handler.flags, handler.callback, this);
        !set) {
      return set;
    }
  }
  return {};
}

void Worker::State::queue_control(PeerId peer, MessageId id, std::string bytes) {
  controls.push_back(Control{peer, id, std::move(bytes)});
}

// Extends the last queued message when it confirms the sequence number just before this one to
// the same peer (a refusal or another peer in between starts a new one).
void Worker::State::queue_delivered(PeerId peer, std::uint64_t sequence) {
  if (!controls.empty()) {
    Control& last = controls.back();
    // A run ending at UINT64_MAX wraps to 0 here, which no delivered sequence is (refused at
    // decode): such a run is never extended.
    if (last.count != 0 && last.peer == peer && last.delivered + last.count == sequence) {
      ++last.count;
      return;
    }
  }
  Control control{peer, MessageId::kAck, {}};
  control.delivered = sequence;
  control.count = 1;
  controls.push_back(std::move(control));
}

// A message that cannot go out (UCX refuses it, or no memory to encode it) leaves its peer
// unanswered: the connection is ended instead, so that the sender learns kClosed.
std::size_t Worker::State::flush_controls() {
  std::vector<Control> queued;
  queued.swap(controls);
  for (Control& control : queued) {
    Peer* peer = find(control.peer);
    if (peer == nullptr || peer->endpoint == nullptr) {
      continue;  // its connection is gone: nobody to tell
    }
    if (PeerFailure failure = send_control(*peer, control); failure.status != UCS_OK) {
      mark_failed(peer, failure.status, failure.what, failure.call);
    }
  }
  return queued.size();
}

PeerFailure Worker::State::send_control(const Peer& peer, Control& control) noexcept {
  constexpr const char* kUnanswered = "was closed here: an answer to it could not be sent";
  try {
    if (control.count != 0) {
      control.bytes = encode(Ack{control.delivered, ErrorCode::kSuccess, {}, control.count});
    }
    // Room to keep the request, made before UCX takes the message: a request let go for want of
    // it would leave a failure under way unnoticed, and its sender waiting for ever.
    if (sending.size() == sending.capacity()) {
      sending.reserve(std::max<std::size_t>(8, 2 * sending.capacity()));
    }
  } catch (...) {
    return PeerFailure{UCS_ERR_NO_MEMORY, kUnanswered, nullptr};  // this side's: no UCX call
  }
  ucp_request_param_t params{};
  params.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  params.flags = UCP_AM_SEND_FLAG_REPLY | UCP_AM_SEND_FLAG_COPY_HEADER | UCP_AM_SEND_FLAG_EAGER;
  void* request = ucp_am_send_nbx(peer.endpoint, static_cast<unsigned>(control.id),
                                  control.bytes.data(), control.bytes.size(), nullptr, 0, &params);
  if (UCS_PTR_IS_ERR(request)) {
    return PeerFailure{UCS_PTR_STATUS(request), kUnanswered, "ucp_am_send_nbx"};
  }
  if (UCS_PTR_IS_PTR(request)) {
    // Kept until sent: a worker shutting down waits for it (a confirmation is not lost), UCX's
    // request pool is whole again before the worker goes, and a failure ends the connection.
    sending.push_back(SentControl{request, peer.id});  // within the room made above: never throws
  }
  return {};
}

// A small message that UCX took and then failed leaves its sender waiting for an answer that never
// comes (a send that never ends, a connect() until its timeout): unless UCX reports the endpoint
// failed by the next round (the reason then), the connection is ended here, so that the other
// side learns kClosed. A peer this side already lost (its close cancelled the message) is left.
bool Worker::State::finish_sent_controls() noexcept {
  for (std::size_t i = 0; i < sending.size();) {
    const ucs_status_t status = ucp_request_check_status(sending[i].request);
    if (status == UCS_INPROGRESS) {
      ++i;
      continue;
    }
    if (status != UCS_OK) {
      defer_failure(find(sending[i].peer), status,
                    "was closed here: an answer to it could not be sent", "ucp_am_send_nbx");
    }
    ucp_request_free(sending[i].request);
    sending[i] = sending.back();
    sending.pop_back();
  }
  return sending.empty();
}

// The listener answers every Hello with its own; the connecting side notes the answer.
void Worker::State::on_hello(ucp_ep_h reply, const std::uint8_t* bytes, std::size_t size) {
  if (being_closed(reply)) {
    return;  // a connection this side is closing: dropped, as once it is closed
  }
  Peer* peer = find(reply);
  auto hello = decode_hello(bytes, size);
  if (peer == nullptr || !hello) {
    ++stats.refused;
    return;
  }
  if (peer->accepted) {
    const auto answer = encode(Hello{});
    queue_control(peer->id, MessageId::kHello, std::string(answer.begin(), answer.end()));
  } else if (!peer->hello_version) {
    peer->hello_version = hello->version;  // a second answer changes nothing
  }
}

}  // namespace holoscan::ucx
