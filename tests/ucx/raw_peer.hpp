#pragma once
// A UCX peer that speaks the wire format by hand, without holoscan::ucx::Worker: it sends
// whatever bytes a test gives it as tensor messages and collects the Acks that come back, and
// notes the sequence numbers of the tensor messages it gets (answering them only when told). It
// connects to a listening Worker, or listens itself and answers a connecting Worker's Hello only
// when told (so that a test decides what that Worker sees before its connect() may return).
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <ucp/api/ucp.h>

namespace holoscan::test {

/** @brief One connection to a listening Worker, made with UCX's API directly. */
class RawPeer {
 public:
  /** @brief Connects to 127.0.0.1:`port`; check ok() afterwards. */
  explicit RawPeer(std::uint16_t port);
  /** @brief Listens on 127.0.0.1, any port (listening_port()); accept() takes the connection. */
  RawPeer();
  /** @brief Closes the connection (flushing it) and frees UCX's objects. */
  ~RawPeer();
  RawPeer(const RawPeer&) = delete;
  RawPeer& operator=(const RawPeer&) = delete;

  /** @brief Whether the context, worker and endpoint exist. */
  bool ok() const noexcept { return endpoint_ != nullptr; }
  /** @brief The port listened on (0: not listening). */
  std::uint16_t listening_port() const noexcept { return listening_port_; }
  /** @brief Progresses until a connection request came (then makes its endpoint: ok()) or
   *         `timeout_ms` passed; whether it came. */
  bool accept(int timeout_ms);
  /** @brief Progresses until `count` Hellos came or `timeout_ms` passed; how many came. */
  std::size_t wait_hellos(std::size_t count, int timeout_ms);
  /** @brief Progresses for `ms`, or until UCX reports the endpoint failed (the other side went). */
  void progress_for(int ms);
  /** @brief Whether UCX reported the endpoint failed. */
  bool endpoint_failed() const noexcept { return endpoint_failed_; }
  /** @brief Sends one active message (`reply`: with the reply endpoint flag) and waits for it
   *         to complete locally; false on a UCX failure. */
  bool send(unsigned id, const std::vector<std::uint8_t>& header,
            const std::vector<std::uint8_t>& data, bool reply = true);
  /** @brief Progresses until `count` sequence numbers were answered, `unnamed` of the Acks among
   *         them naming sequence 0 (a header too broken to name its tensor), or `timeout_ms`
   *         passed; the answers by sequence (an Ack answering a run counts once per sequence). */
  const std::map<std::uint64_t, std::uint32_t>& wait_acks(std::size_t count, int timeout_ms,
                                                          std::size_t unnamed = 0);
  /** @brief How many Acks named sequence 0 (each also counts once in wait_acks()'s answers). */
  std::size_t unnamed_acks() const noexcept { return unnamed_acks_; }
  /** @brief How many Ack messages came (a run of sequences is one message). */
  std::size_t ack_messages() const noexcept { return ack_messages_; }
  /** @brief How many tensor messages came confirming a run (counted in the answers too). */
  std::size_t carried_answers() const noexcept { return carried_answers_; }
  /** @brief Progresses until `count` tensor messages came or `timeout_ms` passed; their
   *         sequence numbers in arrival order. */
  const std::vector<std::uint64_t>& wait_tensors(std::size_t count, int timeout_ms);

 private:
  static ucs_status_t on_ack(void* arg, const void* header, std::size_t header_length, void* data,
                             std::size_t length, const ucp_am_recv_param_t* param);
  static ucs_status_t on_tensor(void* arg, const void* header, std::size_t header_length,
                                void* data, std::size_t length, const ucp_am_recv_param_t* param);
  static ucs_status_t on_hello(void* arg, const void* header, std::size_t header_length, void* data,
                               std::size_t length, const ucp_am_recv_param_t* param);
  static void on_connection_request(ucp_conn_request_h request, void* arg);
  static void on_endpoint_error(void* arg, ucp_ep_h endpoint, ucs_status_t status);
  static ucp_ep_params_t endpoint_params(RawPeer* self);
  bool start();
  void progress_until(const std::function<bool()>& done, int timeout_ms);
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  ucp_ep_h endpoint_ = nullptr;
  ucp_listener_h listener_ = nullptr;
  std::uint16_t listening_port_ = 0;
  ucp_conn_request_h request_ = nullptr;  // a connection request not yet accepted
  std::size_t hellos_ = 0;
  bool endpoint_failed_ = false;
  std::map<std::uint64_t, std::uint32_t> acks_;  // sequence -> ErrorCode value
  std::size_t ack_messages_ = 0;
  std::size_t unnamed_acks_ = 0;
  std::size_t carried_answers_ = 0;
  std::vector<std::uint64_t> tensors_;  // sequence numbers of the tensor messages that came
};

}  // namespace holoscan::test
