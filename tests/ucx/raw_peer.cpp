#include "ucx/raw_peer.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <chrono>
#include <utility>

#include "holoscan/ucx/wire.hpp"

namespace holoscan::test {
namespace {

// Progresses until `request` (from a *_nbx call) completed; its status.
ucs_status_t wait(ucp_worker_h worker, void* request) {
  if (!UCS_PTR_IS_PTR(request)) {
    return UCS_PTR_STATUS(request);
  }
  ucs_status_t status = UCS_INPROGRESS;
  while ((status = ucp_request_check_status(request)) == UCS_INPROGRESS) {
    ucp_worker_progress(worker);
  }
  ucp_request_free(request);
  return status;
}

}  // namespace

ucp_ep_params_t RawPeer::endpoint_params(RawPeer* self) {
  ucp_ep_params_t ep{};
  ep.field_mask = UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
  ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  ep.err_handler.cb = on_endpoint_error;
  ep.err_handler.arg = self;
  return ep;
}

void RawPeer::on_connection_request(ucp_conn_request_h request, void* arg) {
  auto* self = static_cast<RawPeer*>(arg);
  if (self->request_ != nullptr || self->endpoint_ != nullptr) {
    (void)ucp_listener_reject(self->listener_, request);  // one connection
    return;
  }
  self->request_ = request;
}

void RawPeer::on_endpoint_error(void* arg, ucp_ep_h, ucs_status_t) {
  static_cast<RawPeer*>(arg)->endpoint_failed_ = true;
}

ucs_status_t RawPeer::on_hello(void* arg, const void*, std::size_t, void*, std::size_t,
                               const ucp_am_recv_param_t*) {
  ++static_cast<RawPeer*>(arg)->hellos_;
  return UCS_OK;
}

// The context, the worker and the message handlers; false when UCX refused one.
bool RawPeer::start() {
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_AM;
  if (ucp_init(&params, nullptr, &context_) != UCS_OK) {
    context_ = nullptr;
    return false;
  }
  ucp_worker_params_t worker_params{};
  if (ucp_worker_create(context_, &worker_params, &worker_) != UCS_OK) {
    worker_ = nullptr;
    return false;
  }
  ucp_am_handler_param_t handler{};
  handler.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                       UCP_AM_HANDLER_PARAM_FIELD_ARG;
  handler.arg = this;
  const std::pair<ucx::MessageId, ucp_am_recv_callback_t> handlers[] = {
      {ucx::MessageId::kAck, on_ack},
      {ucx::MessageId::kTensor, on_tensor},
      {ucx::MessageId::kHello, on_hello},
  };
  for (const auto& [id, callback] : handlers) {
    handler.id = static_cast<unsigned>(id);
    handler.cb = callback;
    (void)ucp_worker_set_am_recv_handler(worker_, &handler);
  }
  return true;
}

RawPeer::RawPeer(std::uint16_t port) {
  if (!start()) {
    return;
  }
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ucp_ep_params_t ep = endpoint_params(this);
  ep.field_mask |= UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR;
  ep.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
  ep.sockaddr.addr = reinterpret_cast<const sockaddr*>(&address);
  ep.sockaddr.addrlen = sizeof(address);
  if (ucp_ep_create(worker_, &ep, &endpoint_) != UCS_OK) {
    endpoint_ = nullptr;
  }
}

RawPeer::RawPeer() {
  if (!start()) {
    return;
  }
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ucp_listener_params_t params{};
  params.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
  params.sockaddr.addr = reinterpret_cast<const sockaddr*>(&address);
  params.sockaddr.addrlen = sizeof(address);
  params.conn_handler.cb = on_connection_request;
  params.conn_handler.arg = this;
  if (ucp_listener_create(worker_, &params, &listener_) != UCS_OK) {
    listener_ = nullptr;
    return;
  }
  ucp_listener_attr_t attr{};
  attr.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
  if (ucp_listener_query(listener_, &attr) == UCS_OK && attr.sockaddr.ss_family == AF_INET) {
    listening_port_ = ntohs(reinterpret_cast<const sockaddr_in*>(&attr.sockaddr)->sin_port);
  }
}

bool RawPeer::accept(int timeout_ms) {
  progress_until([&] { return request_ != nullptr; }, timeout_ms);
  if (request_ == nullptr) {
    return false;
  }
  ucp_ep_params_t ep = endpoint_params(this);
  ep.field_mask |= UCP_EP_PARAM_FIELD_CONN_REQUEST;
  ep.conn_request = request_;
  request_ = nullptr;  // consumed either way
  if (ucp_ep_create(worker_, &ep, &endpoint_) != UCS_OK) {
    endpoint_ = nullptr;
  }
  return endpoint_ != nullptr;
}

std::size_t RawPeer::wait_hellos(std::size_t count, int timeout_ms) {
  progress_until([&] { return hellos_ >= count; }, timeout_ms);
  return hellos_;
}

void RawPeer::progress_for(int ms) {
  progress_until([&] { return endpoint_failed_; }, ms);
}

RawPeer::~RawPeer() {
  if (endpoint_ != nullptr) {
    ucp_request_param_t params{};
    params.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    params.flags = endpoint_failed_ ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    (void)wait(worker_, ucp_ep_close_nbx(endpoint_, &params));
  }
  if (request_ != nullptr) {
    (void)ucp_listener_reject(listener_, request_);
  }
  if (listener_ != nullptr) {
    ucp_listener_destroy(listener_);
  }
  if (worker_ != nullptr) {
    ucp_worker_destroy(worker_);
  }
  if (context_ != nullptr) {
    ucp_cleanup(context_);
  }
}

bool RawPeer::send(unsigned id, const std::vector<std::uint8_t>& header,
                   const std::vector<std::uint8_t>& data, bool reply) {
  ucp_request_param_t params{};
  params.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  params.flags = reply ? UCP_AM_SEND_FLAG_REPLY : 0;
  return wait(worker_, ucp_am_send_nbx(endpoint_, id, header.data(), header.size(), data.data(),
                                       data.size(), &params)) == UCS_OK;
}

void RawPeer::progress_until(const std::function<bool()>& done, int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!done() && std::chrono::steady_clock::now() < deadline) {
    ucp_worker_progress(worker_);
  }
}

const std::map<std::uint64_t, std::uint32_t>& RawPeer::wait_acks(std::size_t count, int timeout_ms,
                                                                 std::size_t unnamed) {
  progress_until([&] { return acks_.size() >= count && unnamed_acks_ >= unnamed; }, timeout_ms);
  return acks_;
}

const std::vector<std::uint64_t>& RawPeer::wait_tensors(std::size_t count, int timeout_ms) {
  progress_until([&] { return tensors_.size() >= count; }, timeout_ms);
  return tensors_;
}

// Notes the sequence number and the confirmations the header carries; the data (eager, or a
// rendezvous UCX completes) is dropped.
ucs_status_t RawPeer::on_tensor(void* arg, const void* header, std::size_t header_length, void*,
                                std::size_t, const ucp_am_recv_param_t*) {
  auto* self = static_cast<RawPeer*>(arg);
  const auto* bytes = static_cast<const std::uint8_t*>(header);
  self->tensors_.push_back(ucx::peek_sequence(bytes, header_length));
  if (const ucx::AnsweredRun run = ucx::peek_answered(bytes, header_length); run.count != 0) {
    ++self->carried_answers_;
    for (std::uint64_t i = 0; i < run.count; ++i) {
      self->acks_[run.sequence + i] = static_cast<std::uint32_t>(ErrorCode::kSuccess);
    }
  }
  return UCS_OK;
}

ucs_status_t RawPeer::on_ack(void* arg, const void* header, std::size_t header_length, void*,
                             std::size_t, const ucp_am_recv_param_t*) {
  auto ack = ucx::decode_ack(static_cast<const std::uint8_t*>(header), header_length);
  auto* self = static_cast<RawPeer*>(arg);
  if (ack) {
    ++self->ack_messages_;
    self->unnamed_acks_ += ack->sequence == 0 ? 1 : 0;
    for (std::uint64_t i = 0; i < ack->count; ++i) {
      self->acks_[ack->sequence + i] = static_cast<std::uint32_t>(ack->code);
    }
  }
  return UCS_OK;
}

}  // namespace holoscan::test
