#pragma once
// Helpers of the UCX tests: the peer process, a listening worker, and the sending loop that
// keeps within the pool and the window.
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "holoscan/tensor_pool.hpp"
#include "holoscan/ucx.hpp"

namespace holoscan::test {

/**
 * @brief A loopback port bound and never listened on, for the object's life: a connect to it is
 *        refused, and no listener of a test running beside this one can be given it meanwhile
 *        (a port let go of could be).
 */
class RefusingPort {
 public:
  /** @brief Binds `port` on 127.0.0.1, or any free port for 0. */
  explicit RefusingPort(std::uint16_t port = 0);
  ~RefusingPort();
  RefusingPort(const RefusingPort&) = delete;
  RefusingPort& operator=(const RefusingPort&) = delete;

  /** @brief The port bound, 0 where none could be (taken by another process, say). */
  std::uint16_t port() const { return port_; }

 private:
  int socket_;
  std::uint16_t port_ = 0;
};

/** @brief Starts the peer binary (peer_main.cpp) with `arguments`, keeping `inherited` fds open. */
pid_t start_peer(const std::vector<std::string>& arguments, const std::vector<int>& inherited = {});

/** @brief Starts the GPU peer binary (gpu_peer_main.cpp) with `arguments`. */
pid_t start_gpu_peer(const std::vector<std::string>& arguments);

/** @brief Waits up to `timeout_ms` for the peer to exit, progressing `worker` meanwhile (when
 *         given); its exit status, or -1 when it was killed. */
int wait_peer(pid_t pid, int timeout_ms, ucx::Worker* worker = nullptr);

/** @brief The peer binary as a listener that sends tensor 1 before it answers the Hello. */
struct EarlyListener {
  pid_t pid = -1;          ///< The peer process (role early).
  std::uint16_t port = 0;  ///< Where it listens (0: it did not say, the test failed).
};

/** @brief Starts the peer binary as `early` with `options` and reads the port it listens on. */
EarlyListener start_early_listener(const std::vector<std::string>& options);

/** @brief A worker with `config` (fails the test when it cannot be made). */
ucx::Worker make_worker(const ucx::WorkerConfig& config = {});

/** @brief Makes `worker` listen on 127.0.0.1, any port; the port as text (0 on failure). */
std::string listen_on_loopback(ucx::Worker& worker);

/** @brief The two ends of a connection between two workers of this process. */
struct InProcessLink {
  expected<ucx::PeerId, Error> client;  ///< The connecting worker's id of it, or why not.
  ucx::PeerId listener = 0;             ///< The listening worker's id of it (0: not accepted).
};

/** @brief Connects `client` to `listener` (made to listen on the loopback here), both in this
 *         process. */
InProcessLink connect_in_process(ucx::Worker& listener, ucx::Worker& client);

/** @brief A receiving worker and a client connected to it, both in this process. */
struct LinkedWorkers {
  ucx::Worker receiver = make_worker();                       ///< Listens; accepted the client.
  ucx::Worker client = make_worker();                         ///< Connected to the receiver.
  InProcessLink link = connect_in_process(receiver, client);  ///< The connection's two ids.
};

/** @brief A worker and the receiving peer process connected to it. */
struct SendingSide {
  ucx::Worker worker;    ///< Listens on the loopback; the receiver connected to it.
  pid_t receiver = -1;   ///< The peer process (role receive).
  ucx::PeerId peer = 0;  ///< The receiver's connection (0 when it did not come: test failed).
};

/** @brief Starts the peer binary as `receive` with `options` (and `inherited` fds open), connected
 *         to a new worker with `window`. */
SendingSide connect_receiver(std::size_t window, const std::vector<std::string>& options,
                             const std::vector<int>& inherited = {});

/** @brief A worker receiving from the sending peer process. */
struct ReceivingSide {
  std::shared_ptr<TensorPool> pool;  ///< The worker's receive_pool (null: host allocations).
  ucx::Worker worker;                ///< Listens on the loopback; the sender connects to it.
  pid_t sender = -1;                 ///< The peer process (role send).
};

/** @brief A worker receiving into a host pool of `pool_blocks` series-sized blocks (0: into host
 *         allocations), and the peer binary started as `send` with `options`. */
ReceivingSide connect_sender(std::size_t pool_blocks, const std::vector<std::string>& options);

/** @brief Calls `attempt(skip)` for skip = 0, 1, ... while it says that an allocation failed (the
 *         allocation after the first `skip` made to fail); checks that one did, and that they ran
 *         out within 200. */
void for_each_failing_allocation(const std::function<bool(std::uint64_t skip)>& attempt);

/** @brief A TCP listener on loopback that never accepts: the kernel completes a connection to
 *         it, nobody answers (a connect() to it waits to its limit). */
class SilentListener {
 public:
  /** @brief Listens on a free loopback port (a test failure when none). */
  SilentListener();
  /** @brief Closes the socket. */
  ~SilentListener();
  SilentListener(const SilentListener&) = delete;
  SilentListener& operator=(const SilentListener&) = delete;
  /** @brief The port it listens on (0 when it could not). */
  std::uint16_t port() const { return port_; }

 private:
  int fd_;
  std::uint16_t port_ = 0;
};

/** @brief Sends tensors of the series from a host pool and keeps the record of what ended. */
class SeriesSender {
 public:
  /** @brief Sends to `peer` of `worker` from a pool of `blocks` blocks. */
  SeriesSender(ucx::Worker& worker, ucx::PeerId peer, std::size_t blocks);

  /** @brief Sends tensor `k` of the series, waiting for a free block and room in the window;
   *         false (with a test failure) when send() refuses otherwise. */
  bool send(std::uint64_t k);
  /** @brief Progresses once and collects every SendResult waiting. */
  void drain();
  /** @brief Drains until every send ended or `timeout_ms` passed; whether all ended. */
  bool finish(int timeout_ms);
  /** @brief Drains until `count` sends were delivered or `timeout_ms` passed; whether they were. */
  bool wait_delivered(std::size_t count, int timeout_ms);

  std::shared_ptr<TensorPool> pool;                     ///< Where the tensors come from.
  std::vector<std::uint64_t> sent;                      ///< Sequences send() returned.
  std::vector<std::uint64_t> delivered;                 ///< Sequences reported delivered.
  std::vector<std::pair<std::uint64_t, Error>> failed;  ///< Sequences reported failed, and why.
  std::size_t most_in_flight = 0;                       ///< Largest in_flight(peer) seen.

 private:
  ucx::Worker& worker_;
  ucx::PeerId peer_;
};

}  // namespace holoscan::test
