#pragma once
/**
 * @file
 * @brief A UCX worker that sends Tensors to peers on other hosts (or processes) and receives
 *        theirs, with the library's promises: data leaves only once it is ready, memory is
 *        reused only once UCX is done with it, and every tensor sent is accounted for.
 */
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "holoscan/expected.hpp"
#include "holoscan/export.hpp"
#include "holoscan/tensor.hpp"
#include "holoscan/tensor_pool.hpp"

namespace holoscan::ucx {

/** @brief A connection of a Worker, unique for the worker's life (never reused). */
using PeerId = std::uint64_t;

/** @brief How a Worker is set up. */
struct HOLOSCAN_DLPACK_API WorkerConfig {
  /** @brief Tensors per peer sent and not yet delivered or failed; send() beyond it is
   *         kBackpressured. At least 1. */
  std::size_t window = 16;
  /**
   * @brief Where received tensors land: blocks of this pool (host or device memory; a message
   *        waits inside UCX while the pool is exhausted). Null: a fresh host allocation each.
   */
  std::shared_ptr<TensorPool> receive_pool;
  /** @brief Largest payload accepted into a host allocation (a bigger one is refused). */
  std::uint64_t max_receive_bytes = std::uint64_t{1} << 32;
  /**
   * @brief Tensors of one peer accepted and not yet handed out by receive() (waiting for memory,
   *        landing or landed); one more is refused with kBackpressured, answered to its sender.
   *        Also the refusals of one peer kept for receive() to report; past that, a refusal is
   *        answered and counted only. At least 1. A sender of this library has at most its
   *        `window` tensors there.
   */
  std::size_t max_waiting_per_peer = 1024;
  /**
   * @brief Microseconds a wait (receive, accept, connect) keeps polling before it sleeps on fd()
   *        (latency vs CPU; 0 or less: it sleeps at once). The default covers a round trip on
   *        one host: waking a thread that slept costs 100-200 µs on an idle machine, as much as
   *        the transfer it waited for.
   */
  int spin_us = 1000;
  /**
   * @brief A send posted while other sends to its peer are still moving, and a landing started
   *        while others land (a stream), ask UCX for the protocols of the best bandwidth
   *        (`UCP_OP_ATTR_FLAG_MULTI_SEND`) rather than of one transfer's latency; a lone send
   *        never does. False: never.
   */
  bool stream_bandwidth_hint = true;
};

/** @brief A tensor that arrived, with the peer that sent it. */
struct HOLOSCAN_DLPACK_API Received {
  PeerId peer = 0;             ///< The connection it came on.
  std::uint64_t sequence = 0;  ///< The sender's sequence number (what its send() returned).
  Tensor tensor;               ///< Writable, in receiver-owned memory, ready to use.
};

/** @brief What became of one send(). */
struct HOLOSCAN_DLPACK_API SendResult {
  PeerId peer = 0;                ///< Where it went.
  std::uint64_t sequence = 0;     ///< What send() returned.
  expected<void, Error> outcome;  ///< Delivered (the peer's receive() handed it out), or why not.
};

/** @brief Counters of a Worker. */
struct HOLOSCAN_DLPACK_API WorkerStats {
  std::uint64_t sent = 0;             ///< Tensors accepted by send().
  std::uint64_t delivered = 0;        ///< Sent tensors the peer confirmed.
  std::uint64_t failed = 0;           ///< Sent tensors reported failed (refused, closed, error).
  std::uint64_t received = 0;         ///< Tensors handed out by receive().
  std::uint64_t refused = 0;          ///< Incoming messages refused (each answered, if possible).
  std::uint64_t ignored_acks = 0;     ///< Acks naming what is not in flight, or malformed.
  std::uint64_t answers_carried = 0;  ///< Confirmations sent in a tensor's header, no Ack
                                      ///< (counted once UCX completed that message).
  std::uint64_t peers_accepted = 0;   ///< Connections accepted by the listener.
  std::uint64_t peers_lost = 0;       ///< Connections that UCX reported broken (a connect()'s
                                      ///< among them), were closed by the peer, or were ended
                                      ///< here because an answer could not go out; not a
                                      ///< connect() that timed out or found another wire
                                      ///< version (its error is the report).
  std::uint64_t readiness_waits = 0;  ///< Sends held back until their readiness point passed.
  std::uint64_t memory_waits = 0;     ///< Arrivals that waited for a free receive_pool block
                                      ///< (or, held back by their own peer's landing, for
                                      ///< more blocks than the other peers need: docs/ucx.md).
  std::uint64_t landings_kept = 0;    ///< Failed landings whose memory is kept until the process
                                      ///< exits, never reused: the peer's transport (CUDA IPC,
                                      ///< RDMA) may still be writing into it (docs/ucx.md).
  std::uint64_t sends_kept = 0;       ///< Sends UCX failed after they were posted whose memory is
                                      ///< kept until the process exits: the peer's transport may
                                      ///< still be reading it (docs/ucx.md).
};

/**
 * @brief One UCX worker: listens and connects, sends tensors and receives them.
 *
 * Sending: send() never blocks. A tensor with a readiness contract is sent once its readiness
 * point has passed (a stream of the worker waits for it on the GPU and progress() queries an
 * event recorded there); the worker holds a Tensor copy (a handle claim: a pool cannot reuse
 * the block) until UCX reports that it has read the memory. Each peer accepts `window` tensors
 * in flight; the peer confirms each one when its receive() hands it out, or refuses it at once.
 * Every send() ends as exactly one SendResult: delivered, refused (the receiver's code and
 * reason), or failed (kClosed when the connection broke).
 *
 * Receiving: a tensor lands in receiver-owned memory (receive_pool, else a host allocation),
 * device to device through UCX's CUDA transports where they apply, after its header passed the
 * checks of a DLPack import. receive() hands it out once UCX completed the copy: nothing remains
 * to wait for. A refused message is reported by receive() (and to its sender); a peer that
 * disconnects or dies is reported once as kClosed, after every tensor it delivered.
 *
 * Progress: every call progresses UCX, except a receive() that hands out a tensor that had
 * already landed. Between calls, call progress() when fd() is readable (arm() first), and every
 * few tens of microseconds while sends wait for readiness, arrivals for memory or a close to
 * finish (waiting() is not zero; a disconnect of a peer that stalls asks for up to two seconds of
 * it; the worker's own waits sleep on the fd a millisecond at a time while only closes are left).
 * Methods may be called from any thread, one at a time inside (a mutex); connect(), accept() and
 * receive() wait without holding it. The destructor and move-assignment wake the threads asleep in
 * a wait (receive() and connect() return kClosed, accept() nullopt) and wait for every call already
 * under way to return, the deleters it runs included, before they end the worker. No call may start
 * once the destruction began (keep the worker alive until then, as Python's Worker does). A
 * producer's deleter runs with no lock held and may call the worker; one run by the destruction
 * finds it ending (kClosed, or the empty answer). Do not destroy a worker from a deleter its own
 * call runs, nor while holding a lock that a producer's deleter takes: the destructor would wait
 * for that deleter.
 *
 * Out of host memory, the calls that return `expected` report kResourceExhausted instead of
 * throwing; every send that returned a sequence number still ends as exactly one SendResult.
 */
class HOLOSCAN_DLPACK_API Worker {
 public:
  /** @brief A worker on a fresh UCX context (active messages, wakeup). */
  static expected<Worker, Error> create(const WorkerConfig& config = {});
  /** @brief Takes `other`'s worker; `other` is left empty: its calls return kInvalidArgument
   *         (nullopt, -1, 0, false or zero counters where they return no error). */
  Worker(Worker&& other) noexcept;
  /** @brief Closes this worker (as the destructor does), then takes `other`'s. */
  Worker& operator=(Worker&& other) noexcept;
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;
  /**
   * @brief Closes every connection (flushing for up to two seconds), reports every send still in
   *        flight as failed, and drops the claims once UCX has let go of their memory; the memory
   *        of a transfer UCX has not finished by then is kept until the process exits (never
   *        reused while UCX may still touch it).
   */
  ~Worker();

  /**
   * @brief Listens on `address` ("0.0.0.0", an interface's address, "::") and `port` (0: any)
   *        and returns the port bound. One listener per worker (kDuplicateName for a second, and
   *        for a port another socket holds).
   */
  expected<std::uint16_t, Error> listen(const std::string& address, std::uint16_t port = 0);

  /**
   * @brief Connects to a listening worker and waits up to `timeout_ms` for its Hello.
   *        kClosed when nobody listens there, kTimeout, kIncompatible for another wire version.
   */
  expected<PeerId, Error> connect(const std::string& address, std::uint16_t port,
                                  int timeout_ms = 5000);

  /**
   * @brief The next connection the listener accepted, waiting up to `timeout_ms` (0: do not
   *        wait, negative: no limit); nullopt when none came. Each is returned once; one that
   *        ended and was forgotten before it was asked for (see docs/ucx.md) is not. Never
   *        throws: out of host memory it returns nullopt early (a request stays queued). A worker
   *        not listening yet waits all the same (a listen() on another thread may start it), so
   *        accept(-1) before any listen() returns only at stop() or destruction.
   */
  std::optional<PeerId> accept(int timeout_ms);

  /** @brief Closes a connection (kNotFound for an unknown peer, as in send()); its sends in
   *         flight are reported failed (kClosed), though those already on their way may still
   *         reach the peer (docs/ucx.md, what failed means), and receive() reports nothing more of
   *         it (its tensors not handed out are dropped). UCX finishes what it moves for up to a
   *         second; a peer that stalls is then cut off. Out of host memory it returns
   *         kResourceExhausted and the next progress round finishes the disconnect. */
  expected<void, Error> disconnect(PeerId peer);

  /**
   * @brief Sends `tensor` to `peer` and returns its sequence number; never waits.
   *
   * Sequence numbers count 1, 2, 3, ... per peer, one for each send() that succeeded, so a
   * receiver can tell which send a Received tensor came from.
   *
   * kBackpressured at once when `window` tensors are in flight to the peer; kNotFound for an
   * unknown peer (also the id of a connect() that has not returned it yet), kClosed for a lost
   * one; kInvalidArgument for an empty tensor, one of more than 32 dimensions (the wire's limit),
   * or a view written by hand with dimensions and no shape;
   * kNotImplemented for a tensor that is not contiguous, is padded sub-byte, or lives on a device
   * type UCX does not move; kFailure naming the CUDA call when the readiness wait cannot be set up.
   */
  expected<std::uint64_t, Error> send(PeerId peer, const Tensor& tensor);

  /** @brief The next SendResult, in the order the sends ended; nullopt when none is waiting. */
  std::optional<SendResult> next_send_result();

  /**
   * @brief The next arrival, waiting up to `timeout_ms` (0: do not wait, negative: no limit);
   *        nullopt when none came. Handing it out confirms it to its sender, with the next
   *        progress round (tensors handed out one after the other share one confirmation).
   *
   * What a peer whose connect() has not returned yet sent is held until it has (the caller has
   * its id then), and dropped when connect() fails.
   *
   * Tensors and errors come in each peer's arrival order: a tensor still landing holds back its
   * own peer's later ones, not another peer's.
   *
   * Errors, each reported once, in arrival order, the worker staying usable: a refused message
   * (kInvalidArgument / kProtocolError / kIncompatible / kNotImplemented naming the field, or
   * the pool's or the allocation's refusal); kClosed naming a peer that closed the connection or
   * died, or whose connection this worker ended because an answer to it could not go out.
   */
  expected<std::optional<Received>, Error> receive(int timeout_ms);

  /** @brief Progresses UCX, sends what became ready, lands what found memory; never blocks.
   *         Returns how many things happened. */
  expected<std::size_t, Error> progress();

  /** @brief The descriptor to sleep on (UCX's event fd and the worker's own signal, one epoll
   *         set): readable when progress() has something to do. */
  int fd() const noexcept;
  /**
   * @brief Prepares fd() for a wait: true when it is safe to sleep on it now, false when there
   *        is work to do first (call progress() and try again). Until this thread's next
   *        progress(), work another thread queues that needs a round or a poll (a confirmation
   *        receive() queued, a send held for its readiness), and what another thread's call
   *        did in its progress rounds (a tensor landed, a send ended, a peer lost), make fd()
   *        readable; done between this thread's last look and arm(), they make arm() false.
   *        One event loop per worker: the thread that called arm() last is taken for it.
   */
  bool arm();

  /**
   * @brief Stops the worker now, from any thread, and returns once it holds the worker's mutex:
   *        the waits under way end as the destructor ends them (receive() and connect() return
   *        kClosed, accept() nullopt), every later call is refused (kClosed "the worker was
   *        stopped", or the empty answer), and nothing more is accepted, landed, handed out or
   *        confirmed; a call that took an arrival before it still returns that. fd() says -1 and
   *        the event loop is woken. Nothing progresses until the worker is destroyed, which closes
   *        the connections and ends the sends in flight as failed: destroy it soon, as the peers'
   *        sends wait for their answers until then. Idempotent.
   */
  void stop() noexcept;

  /** @brief Sends in flight to every peer (not yet ended as a SendResult). */
  std::size_t in_flight() const noexcept;
  /** @brief Sends in flight to `peer`. */
  std::size_t in_flight(PeerId peer) const noexcept;
  /** @brief Sends held for readiness, arrivals held for memory and closes under way (an orderly
   *         close for up to a second, then UCX's teardown): progress() must be polled. */
  std::size_t waiting() const noexcept;
  /** @brief Whether `peer` is connected (known, given by connect() or accept(), not lost or
   *         closed; a disconnect() that ran out of memory partway closed it too). */
  bool connected(PeerId peer) const noexcept;
  /** @brief The counters so far. */
  WorkerStats stats() const noexcept;
  /** @brief Whether this is a forked child's copy of its parent's worker: the calls that report
   *         errors refuse it (kNotSupported), the others answer as an empty worker's would. */
  bool is_forked_copy() const noexcept;
  /** @brief The kNotSupported error a forked child's copy gives for `call` (the caller's name). */
  static Error forked_copy_error(const std::string& call);

  struct State;  ///< The UCX handles, peers, sends in flight and arrivals.

 private:
  explicit Worker(std::unique_ptr<State> state) noexcept;
  std::unique_ptr<State> state_;
};

}  // namespace holoscan::ucx
