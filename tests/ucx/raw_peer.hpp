#pragma once
// A UCX client that speaks the wire format by hand, without holoscan::ucx::Worker: it sends
// whatever bytes a test gives it as tensor messages and collects the Acks that come back.
#include <cstddef>
#include <cstdint>
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
  /** @brief Closes the connection (flushing it) and frees UCX's objects. */
  ~RawPeer();
  RawPeer(const RawPeer&) = delete;
  RawPeer& operator=(const RawPeer&) = delete;

  /** @brief Whether the context, worker and endpoint exist. */
  bool ok() const noexcept { return endpoint_ != nullptr; }
  /** @brief Sends one active message (`reply`: with the reply endpoint flag) and waits for it
   *         to complete locally; false on a UCX failure. */
  bool send(unsigned id, const std::vector<std::uint8_t>& header,
            const std::vector<std::uint8_t>& data, bool reply = true);
  /** @brief Progresses until `count` Acks came or `timeout_ms` passed; the Acks by sequence. */
  const std::map<std::uint64_t, std::uint32_t>& wait_acks(std::size_t count, int timeout_ms);

 private:
  static ucs_status_t on_ack(void* arg, const void* header, std::size_t header_length, void* data,
                             std::size_t length, const ucp_am_recv_param_t* param);
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  ucp_ep_h endpoint_ = nullptr;
  std::map<std::uint64_t, std::uint32_t> acks_;  // sequence -> ErrorCode value
};

}  // namespace holoscan::test
