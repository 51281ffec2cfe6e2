#pragma once
// Everything a Worker holds, and the steps its public calls are made of. Every member is used
// under `mutex`; UCX calls back only from inside ucp_worker_progress (or the calls that complete
// requests), which the worker makes under the same mutex.
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <sys/socket.h>

#include <ucp/api/ucp.h>

#include "calls_under_way.hpp"
#include "dlpack/held_claim.hpp"  // the core's claim holder (internal)
#include "event_loop_fd.hpp"
#include "fork_watch.hpp"
#include "holoscan/ucx/wire.hpp"
#include "holoscan/ucx/worker.hpp"
#include "readiness_gate.hpp"
#include "ucp_objects.hpp"
#include "wake_signal.hpp"

namespace holoscan::ucx {

/** @brief A socket address resolved for listen() or connect(). */
struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;
  const sockaddr* get() const noexcept { return reinterpret_cast<const sockaddr*>(&storage); }
};

/**
 * @brief Resolves `address` and `port` (passive: for a listener). Called without the worker's
 *        mutex: a name server may take seconds to answer, and every other call would wait.
 */
expected<SocketAddress, Error> resolve_address(const std::string& who, const std::string& address,
                                               std::uint16_t port, bool passive);

/** @brief One send() until it ends as a SendResult. */
struct Outgoing {
  /** @brief Where the tensor's memory stands with UCX. */
  enum class Phase {
    kHeld,      ///< Waiting for its readiness point (or its turn): UCX has not seen it.
    kPosted,    ///< Handed to UCX, which may be reading the memory.
    kReleased,  ///< UCX is done with the memory (sent, failed or never posted): claim dropped.
  };
  Worker::State* state = nullptr;
  PeerId peer = 0;
  std::uint64_t sequence = 0;
  /** @brief Keeps the memory from reuse until kReleased: a claim on the reference the tensor had
   *         at send(), which a reference put into its context later neither frees nor takes. */
  holoscan::detail::HeldClaim claim;
  /** @brief The payload, read with the header at send(): a view rewritten later changes neither. */
  const void* payload = nullptr;
  std::size_t payload_bytes = 0;  ///< The header's payload_bytes.
  std::array<std::uint8_t, kMaxTensorHeaderBytes> header{};
  std::size_t header_size = 0;
  ucs_memory_type_t memory_type = UCS_MEMORY_TYPE_UNKNOWN;
  std::optional<detail::ReadinessGate::Ticket> ticket;  ///< While its readiness is pending.
  /** @brief Whether its peer may read the memory itself (remote_writes.hpp: the transports that
   *         write this side's memory read it too): then a send UCX fails after it was posted
   *         keeps the memory until the process exits. */
  bool peer_reads = false;
  AnsweredRun answered;  ///< The peer's tensors its header confirms (taken from `controls`).
  Phase phase = Phase::kHeld;
  void* request = nullptr;  ///< UCX's request while kPosted, if it did not complete at once.
  std::optional<expected<void, Error>> outcome;  ///< The peer's answer, or the failure.
  bool ended = false;                            ///< Reported as a SendResult.
};

/** @brief One tensor message that arrived, until receive() hands it (or its refusal) out. */
struct Arrival {
  /** @brief How far it got. */
  enum class Phase {
    kWaitingMemory,  ///< Accepted; its data waits inside UCX for receiver memory.
    kLanding,        ///< UCX is copying it into `tensor`.
    kLanded,         ///< In `tensor`, to be handed out.
    kRefused,        ///< Refused: `error` is reported by receive().
    kPeerClosed,     ///< Marks the end of a lost peer's arrivals: `error` is kClosed.
    kDropped,        ///< Its peer was lost first: nothing to report.
  };
  Worker::State* state = nullptr;
  PeerId peer = 0;
  TensorHeader header;
  void* data = nullptr;  ///< UCX's data descriptor while kWaitingMemory.
  std::size_t length = 0;
  Tensor tensor;
  Error error;
  Phase phase = Phase::kWaitingMemory;
  void* request = nullptr;    ///< UCX's request while kLanding, if it did not complete at once.
  bool counted_wait = false;  ///< Counted once in WorkerStats::memory_waits.
  /** @brief Left waiting behind its own peer's landing so that the pool's last blocks stay with
   *         the other peers (land_arrivals): only that landing, a UCX event that wakes the worker,
   *         can let it go, so waiting() does not count it (nothing to poll for). */
  bool behind_its_peer = false;
  /** @brief Whether its peer may write into `tensor` itself while landing (remote_writes.hpp):
   *         then a landing UCX fails keeps the memory until the process exits. */
  bool peer_writes = false;
};

/** @brief One connection. */
/** @brief What ended, or will end, a peer's connection: static texts, set without allocating. */
struct PeerFailure {
  ucs_status_t status = UCS_OK;  ///< UCX's status (UCS_OK: no failure).
  const char* what = "";         ///< What failed, for the kClosed message.
  /** @brief The UCX call (or callback) that reported it; null where the failure is this side's
   *         own (out of host memory). */
  const char* call = nullptr;
};

struct Peer {
  PeerId id = 0;
  ucp_ep_h endpoint = nullptr;  ///< Null once closed.
  std::string name;             ///< "host:port" as given or as the listener saw it.
  bool accepted = false;        ///< Accepted by the listener (else this worker connected).
  bool lost = false;            ///< Failed, closed by the peer, or disconnected here.
  bool connecting = false;      ///< connect() has not returned its id: arrivals held.
  /** @brief A loss decided here and told to nobody, left to the next round after host memory
   *         ran out partway: nothing more of the peer is handed out meanwhile. */
  enum class Untold : std::uint8_t {
    kNo,            ///< None (the usual case).
    kAbandoned,     ///< connect() failed: its id was never given.
    kDisconnected,  ///< disconnect() asked.
  };
  Untold untold = Untold::kNo;  ///< See Untold.
  /** @brief Whether a call may have handed its id to the caller: not while a connect() on another
   *         thread still waits for it (ids are easy to guess). A failed connect()'s id reads as
   *         lost (kClosed) once it returned, as any connection that ended. */
  bool handed_out() const noexcept { return !connecting && untold != Untold::kAbandoned; }
  /** @brief Whether the connection is over for the caller: lost, or a loss decided here that the
   *         next round finishes (connected() false, send() kClosed). */
  bool gone() const noexcept { return lost || untold != Untold::kNo; }
  /** @brief The loss of a peer still connecting, for receive() only once connect() gave its id. */
  std::unique_ptr<Arrival> loss_report;
  std::optional<std::uint32_t> hello_version;  ///< The listener's answer (connecting side).
  std::uint64_t next_sequence = 1;
  std::deque<std::unique_ptr<Outgoing>> outgoing;  ///< In send order; ended ones swept.
  /** @brief Why the connection must end (status UCS_OK: it need not), set without allocating (in
   *         UCX's callbacks, or where an answer could not go out) and acted on by
   *         handle_failures(). */
  PeerFailure failure;
  bool endpoint_failed = false;  ///< UCX reported the endpoint failed: it is closed at once.
  /** @brief A landing of its tensors, or a small message to it, that UCX failed while the
   *         endpoint stayed up (status UCS_OK: none), and the progress round it happened in.
   *         Something went unanswered: unless UCX reports the endpoint failed by the next round
   *         (then that is the reason), the connection is ended here (defer_failure,
   *         handle_failures) so that the other side learns kClosed, not nothing. */
  PeerFailure deferred_failure;
  std::uint64_t deferred_failure_round = 0;
  /** @brief Whether it may write into this side's memory itself (remote_writes.hpp), asked of
   *         UCX at its first landing. */
  std::optional<bool> writes_remotely;
};

/** @brief A small message waiting to go out after the current progress round. */
struct Control {
  PeerId peer = 0;
  MessageId id = MessageId::kAck;
  std::string bytes;            ///< Encoded (a Hello, a refusal); empty for delivered tensors.
  std::uint64_t delivered = 0;  ///< Delivered tensors: the first sequence number handed out,
  std::uint64_t count = 0;      ///< and how many consecutive ones after it (0: not deliveries).
};

struct Worker::State {
  explicit State(const WorkerConfig& worker_config) : config(worker_config) {}

  WorkerConfig config;
  mutable std::mutex mutex;
  // The public calls under way: the destructor (or a move-assignment) marks their end, so that
  // calls are refused from then on, waits under way return and the deleters that the
  // destructor's drops run (they may call the worker) find it ending; then it waits for them to
  // return before it ends the worker, so that a thread asleep in receive(), accept() or
  // connect() wakes to kClosed (or no answer) instead of finding the worker gone.
  holoscan::detail::CallsUnderWay calls;
  // Set by stop() before it marks the calls' end, so that a call refused for it says so.
  std::atomic<bool> stopped{false};
  // The fork()s that led to the process that made this worker: another count now means this is
  // a forked child's copy (fork_watch.hpp), which leaves UCX and the shared sockets alone.
  const std::uint64_t made_after_forks = detail::forks_so_far();
  detail::LiveWorker live;  // for the fork handler
  detail::UniqueContext context;
  detail::UniqueWorker worker;
  int efd = -1;
  detail::WakeSignal wake;      // for threads asleep on efd when another thread progresses
  detail::EventLoopFd loop_fd;  // fd(): efd and announce()'s signal to the caller's event loop
  std::size_t max_am_header = 0;
  ucp_listener_h listener = nullptr;

  std::unordered_map<PeerId, Peer> peers;  // a peer that is over is erased (sweep_ended)
  std::unordered_map<ucp_ep_h, PeerId> by_endpoint;
  PeerId next_peer = 1;
  std::vector<ucp_conn_request_h> connection_requests;
  std::deque<PeerId> accepted;  // for accept(), in the order the listener took them
  bool peers_failed = false;    // some Peer::failure is set
  bool unended_sends = false;   // a send with its outcome could not be ended (out of memory)
  std::vector<void*> closing;   // endpoint closes UCX has not finished (polled for a while)
  // Until when the closes are polled: one that UCX finishes by its own progress does so within a
  // few rounds; after that it waits for the peer's answer or its connection breaking, which the
  // fd announces (a peer that hangs would keep every wait polling for as long as it hangs).
  std::chrono::steady_clock::time_point closes_polled_until{};
  /** @brief A small message UCX took and has not sent yet, and the connection it goes on. */
  struct SentControl {
    void* request = nullptr;
    PeerId peer = 0;
  };
  std::vector<SentControl> sending;  // polled each round (their fd events suffice)
  /** @brief An orderly close under way: its endpoint's flush, and when it is forced instead. */
  struct OrderlyClose {
    ucp_ep_h endpoint = nullptr;  ///< Taken from its peer (no longer found by it).
    PeerId peer = 0;              ///< Whose sends and landings are waited for.
    void* flush = nullptr;        ///< The endpoint's flush request, not yet completed.
    std::chrono::steady_clock::time_point force_at{};  ///< When a peer that stalls is cut off.
  };
  // Endpoints of a disconnect (or of a connection ended here) whose flush has not finished: each
  // is closed once it has, or by force at its force_at. Polled until then (waiting_locked), since
  // no event announces a deadline; a peer that stalls no longer holds its sends for good.
  std::vector<OrderlyClose> flushing;

  /** @brief The arrivals' container. */
  using ArrivalList = std::deque<std::unique_ptr<Arrival>>;
  ArrivalList arrivals;  // in arrival order
  std::deque<SendResult> results;
  std::vector<Control> controls;
  detail::ReadinessGate gate;
  // Claims of sends UCX is done with. Dropping one may run the producer's deleter, which may call
  // this worker: they are let go of by StateLock once the mutex is released. A send reserves room
  // for its claim here when it takes it, so that moving one in never allocates.
  std::vector<holoscan::detail::HeldClaim> dropped_claims;
  std::size_t claims_held = 0;  // claims taken and not yet moved into dropped_claims
  WorkerStats stats;
  std::uint64_t rounds = 0;  // progress rounds so far
  // The public arm() said "sleep" and neither a signal nor the event loop's own progress() came
  // since: an event loop may be asleep on fd(), which work queued outside its rounds must make
  // readable (announce()).
  bool armed_for_caller = false;
  // The thread of the last public arm(): the event loop's. What its own rounds do it sees next;
  // what another thread's rounds do (a tensor landed, a send ended) must be announced to it.
  std::thread::id event_loop_thread;
  // Work was announced while no arm() stood (a connect() on another thread released its peer's
  // tensors between the loop's receive() and its arm()): the next arm() says "not now" instead.
  bool announced_unarmed = false;

  // worker.cpp
  std::size_t progress_locked();
  void tell_round_done(std::size_t done) noexcept;
  bool arm_locked();
  std::size_t waiting_locked() const noexcept;
  std::size_t closes_waiting_locked() const noexcept;
  Peer* find(PeerId id) noexcept;
  Peer* find(ucp_ep_h endpoint) noexcept;
  void end_calls_then_shut_down() noexcept;
  bool forked_copy() const noexcept { return made_after_forks != detail::forks_so_far(); }
  void announce() noexcept;

  // worker_connect.cpp
  expected<std::uint16_t, Error> listen_locked(const std::string& who,
                                               const expected<SocketAddress, Error>& resolved);
  expected<PeerId, Error> start_connect(const std::string& name, const SocketAddress& resolved);
  std::size_t accept_connections();
  void finish_connect(Peer& peer);
  void abandon_connect(Peer& peer);
  PeerId add_peer(ucp_ep_h endpoint, std::string name);
  /** @brief Ends `peer`'s connection in the next handle_failures() for `what`, reported by `call`
   *         (static texts; `call` null for this side's own failures); the first failure stays. */
  void mark_failed(Peer* peer, ucs_status_t status, const char* what, const char* call) noexcept;
  /** @brief A loss this worker decided (`why`) that ran out of host memory partway: the next
   *         round ends it whole, reporting nothing; until then nothing of the peer is handed
   *         out, and an event loop asleep on fd() is woken for that round. */
  void lose_untold_next_round(Peer& peer, Peer::Untold why, const char* what) noexcept;
  /** @brief Ends `peer`'s connection for `what` unless UCX reports its endpoint failed by the
   *         next round (Peer::deferred_failure); null or lost peers are left alone. */
  void defer_failure(Peer* peer, ucs_status_t status, const char* what, const char* call) noexcept;
  std::size_t handle_failures();
  void lose_peer(Peer& peer, const Error& reason, bool report);
  void close_endpoint(Peer& peer, bool force);
  void begin_orderly_close(ucp_ep_h endpoint, PeerId peer) noexcept;
  bool requests_pending(PeerId peer) noexcept;
  bool being_closed(ucp_ep_h endpoint) const noexcept;
  std::size_t finish_orderly_closes(bool force_all);
  void abandon_orderly_closes() noexcept;
  void close_now(ucp_ep_h endpoint, bool force, std::chrono::milliseconds polling) noexcept;
  bool drain_closing() noexcept;
  bool requests_pending() const noexcept;
  void settle(std::chrono::milliseconds limit);
  void keep_unsettled_memory() noexcept;
  void shut_down() noexcept;

  // worker_send.cpp
  expected<std::uint64_t, Error> send_locked(PeerId peer, const Tensor& tensor);
  void drop_claim(Outgoing& send) noexcept;
  /** @brief Keeps a failed send's memory until the process exits (its peer's read may run). */
  void keep_failed_send(Outgoing& send) noexcept;
  std::size_t post_ready_sends();
  void fail_unready(Outgoing& send, const Error& why);
  void on_ucx_done(Outgoing& send, ucs_status_t status);
  void on_ack(ucp_ep_h reply_endpoint, const std::uint8_t* bytes, std::size_t size);
  void answer_sends(Peer& peer, const Ack& ack);
  void attach_answers(Outgoing& send) noexcept;
  void finish_answers(Outgoing& send, ucs_status_t status);
  void fail_outgoing(Peer& peer, const Error& reason);
  void end_if_done(Outgoing& send);
  std::size_t end_unended();
  void sweep_ended();
  /** @brief Whether `peer` is lost and nothing of it is left (sends, arrivals, a loss report). */
  bool over(const Peer& peer) const noexcept;
  /** @brief Whether `id` was given out and its peer forgotten: a connection that ended. */
  bool closed(PeerId id) const noexcept;
  std::size_t in_flight_locked(const Peer& peer) const noexcept;

  // worker_arrivals.cpp
  ucs_status_t on_tensor_message(const void* header, std::size_t header_length, void* data,
                                 std::size_t length, const ucp_am_recv_param_t& param);
  std::size_t land_arrivals();
  void on_landed(Arrival& arrival, ucs_status_t status, std::size_t length);
  /** @brief Whether `peer` may write into this side's memory itself (asked of UCX once). */
  bool writes_remotely(Peer& peer) noexcept;
  /** @brief Keeps a failed landing's memory until the process exits (its peer's copy may run). */
  void keep_failed_landing(Arrival& arrival) noexcept;
  void refuse(Arrival& arrival, Error error);
  /** @brief refuse(), the peer's refusals kept counted already (bound_counts). */
  void refuse(Arrival& arrival, Error error, std::size_t refusals_kept);
  /** @brief Counts a refusal and queues its Ack to `peer` (0: none to answer). */
  void answer_refusal(PeerId peer, std::uint64_t sequence, const Error& error) noexcept;
  /** @brief How much of a lost peer's arrivals goes: those waiting for memory, also those
   *         landed and not handed out, or also the refusals and the loss still to report. */
  enum class Dropping { kWaiting, kUnhanded, kEverything };
  void drop_arrivals(PeerId peer, Dropping dropping) noexcept;
  std::optional<expected<Received, Error>> take_arrival();
  /** @brief What of one peer's arrivals waits for receive() (WorkerConfig::max_waiting_per_peer
   *         bounds both). */
  struct PeerArrivals {
    std::size_t unreceived = 0;  ///< Accepted: waiting for memory, landing or landed.
    std::size_t refusals = 0;    ///< Refused, to be reported.
  };
  /** @brief `peer`'s counts, exact wherever one could reach max_waiting_per_peer (zero while the
   *         whole list is shorter than that: no count can). */
  PeerArrivals bound_counts(PeerId peer) const noexcept;
  /** @brief Whether one more refusal of a peer with `refusals_kept` is kept for receive(). */
  bool keeps_refusal(std::size_t refusals_kept) const noexcept {
    return refusals_kept < config.max_waiting_per_peer;
  }
  bool held_back_by_its_peer(ArrivalList::const_iterator it) const noexcept;
  std::size_t connected_peers() const noexcept;

  // worker_control.cpp
  void queue_control(PeerId peer, MessageId id, std::string bytes);
  void queue_delivered(PeerId peer, std::uint64_t sequence);
  std::size_t flush_controls();
  /** @brief Frees the small messages UCX is done with, ending the connection of one it failed
   *         (defer_failure); whether none is left. */
  bool finish_sent_controls() noexcept;
  /** @brief Sends one queued small message: its failure, if it failed (status UCS_OK if not). */
  PeerFailure send_control(const Peer& peer, Control& control) noexcept;
  void on_hello(ucp_ep_h reply_endpoint, const std::uint8_t* bytes, std::size_t size);
  expected<void, Error> register_handlers();
};

/**
 * @brief The worker's mutex, held for one scope. The claims dropped meanwhile are let go of after
 *        it is unlocked, so that a producer's deleter never runs under it.
 */
class StateLock {
 public:
  /** @brief Locks `state`'s mutex. */
  explicit StateLock(Worker::State& state) : state_(state) { state_.mutex.lock(); }
  StateLock(const StateLock&) = delete;
  StateLock& operator=(const StateLock&) = delete;
  /** @brief Unlocks, then drops the claims that were set aside. */
  ~StateLock();

 private:
  Worker::State& state_;
};

}  // namespace holoscan::ucx
