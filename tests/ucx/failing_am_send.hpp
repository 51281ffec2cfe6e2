#pragma once
// The UCX test binary replaces ucp_am_send_nbx (failing_am_send.cpp: it calls UCX's own through
// dlsym(RTLD_NEXT)) so that a test can make the active messages of one id fail as if UCX had
// refused them, or had failed them under way, which nothing else can make happen on demand; and
// ucp_request_check_status and ucp_request_free, for the requests it made up.
#include <cstddef>

#include <ucp/api/ucp.h>

#include "holoscan/ucx/wire.hpp"

namespace holoscan::test {

/** @brief While alive, the next `count` sends of active message `id` in this process fail with
 *         `status` (UCX is not called for them). */
class FailingAmSends {
 public:
  /** @brief Arms the failures. */
  FailingAmSends(ucx::MessageId id, ucs_status_t status, std::size_t count = 1) noexcept;
  /** @brief Disarms them. */
  ~FailingAmSends();
  FailingAmSends(const FailingAmSends&) = delete;
  FailingAmSends& operator=(const FailingAmSends&) = delete;
  /** @brief How many sends failed so far. */
  std::size_t failed() const noexcept;
};

/** @brief While alive, the next `count` tensor messages UCX takes under way (it returns a
 *         request) complete with `status` instead of UCX's own, as when the connection fails
 *         mid-transfer; UCX still sends them. */
class FailingSendsUnderWay {
 public:
  /** @brief Arms the failures. */
  FailingSendsUnderWay(ucs_status_t status, std::size_t count = 1) noexcept;
  /** @brief Disarms them. */
  ~FailingSendsUnderWay();
  FailingSendsUnderWay(const FailingSendsUnderWay&) = delete;
  FailingSendsUnderWay& operator=(const FailingSendsUnderWay&) = delete;
  /** @brief How many sends were made to fail so far. */
  std::size_t failed() const noexcept;
};

/** @brief While alive, the next `count` active messages of `id` that the worker sends without a
 *         callback (its small messages) are taken as if UCX had them under way, and are never
 *         sent: ucp_request_check_status() then reports `status` for them, as for a message
 *         UCX failed while its endpoint stayed up. */
class FailingControlsUnderWay {
 public:
  /** @brief Arms the failures. */
  FailingControlsUnderWay(ucx::MessageId id, ucs_status_t status, std::size_t count = 1) noexcept;
  /** @brief Disarms them (requests already handed out keep their status). */
  ~FailingControlsUnderWay();
  FailingControlsUnderWay(const FailingControlsUnderWay&) = delete;
  FailingControlsUnderWay& operator=(const FailingControlsUnderWay&) = delete;
  /** @brief How many messages were taken so far. */
  std::size_t failed() const noexcept;
};

/** @brief Tensor messages this process posted to UCX so far (refused ones included), and how
 *         many of them asked for bandwidth (`UCP_OP_ATTR_FLAG_MULTI_SEND`). */
struct PostedTensorMessages {
  std::size_t all = 0;        ///< Every ucp_am_send_nbx of MessageId::kTensor.
  std::size_t bandwidth = 0;  ///< Those with the flag.
};

/** @brief The counts so far (take two and subtract). */
PostedTensorMessages posted_tensor_messages() noexcept;

}  // namespace holoscan::test
