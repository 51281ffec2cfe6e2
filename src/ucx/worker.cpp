// The Worker's public calls: each takes the mutex and runs the steps of Worker::State; the ones
// that wait (connect, accept, receive) do so between rounds without the mutex.
#include <poll.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <new>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>

#include "holoscan/ucx/worker.hpp"
#include "worker_state.hpp"

namespace holoscan::ucx {
namespace {

using Clock = std::chrono::steady_clock;

// How long a wait sleeps at most while something must be polled rather than awaited.
constexpr std::chrono::microseconds kPollingSleep{20};
// How long a wait with only closes to poll sleeps on the fd between rounds.
constexpr std::chrono::milliseconds kClosePollingSleep{1};

// Whether the destructor has begun: each call counts itself first (calls_under_way.hpp), so that
// either the destructor waits for it or it sees the end.
bool ending(const Worker::State& state) noexcept { return state.calls.ending(); }

// Sleeps until `fd` or `wake` is readable or `limit` passed (negative fds are left out).
void sleep_on(int fd, int wake, std::chrono::nanoseconds limit) {
  const auto nanoseconds = limit.count() > 0 ? limit.count() : 0;
  const timespec timeout{static_cast<time_t>(nanoseconds / 1000000000),
                         static_cast<long>(nanoseconds % 1000000000)};
  pollfd entries[2] = {{fd, POLLIN, 0}, {wake, POLLIN, 0}};
  (void)ppoll(entries, 2, &timeout, nullptr);  // a negative fd is ignored by poll
}

// Runs `step` under the mutex after each progress round until it yields a value or `timeout_ms`
// ran out (0: one round, negative: no limit). Between rounds it spins for spin_us, then sleeps
// on the event fd (and the wake signal, posted when another thread's round did the work), or
// briefly while something must be polled that no fd announces.
template <class Step>
auto wait_for(Worker::State& state, int timeout_ms, Step step) -> decltype(step()) {
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::milliseconds(timeout_ms);
  const auto spin_until = start + std::chrono::microseconds(state.config.spin_us);
  std::optional<std::uint64_t> slept;  // the wake signal's ticket while asleep
  bool spin_yield = false;
  for (;;) {
    if (spin_yield) {
      // A polling thread gives its CPU to whoever else is runnable there (on a busy machine, often
      // the peer it waits for), and gets it back at once when nobody is.
      sched_yield();
      spin_yield = false;
    }
    bool armed = false;
    bool closes_only = false;
    if (state.forked_copy()) {
      // A fork() from inside the call (a deleter's, run as the last round's lock went): the
      // child's copy of this wait stops before the parent's UCX, and before the mutex, whose copy
      // another of the parent's threads may hold for ever.
      return std::nullopt;
    }
    {
      StateLock lock(state);
      if (slept) {
        state.wake.leave_sleep(*slept);
        slept.reset();
      }
      if (ending(state)) {
        return std::nullopt;  // the destructor waits for this call: the caller says kClosed
      }
      state.progress_locked();
      if (auto done = step()) {
        return done;
      }
      const auto now = Clock::now();
      if (timeout_ms == 0 || (timeout_ms > 0 && now >= deadline)) {
        return std::nullopt;
      }
      if (now < spin_until) {
        spin_yield = true;
        continue;
      }
      // Without a wake signal another thread's round could leave this one asleep: poll instead.
      // Closes alone are polled by sleeping on the fd a millisecond at a time: they wait for a
      // deadline or for UCX's teardown, and polling them at once cost a disconnect of a peer
      // that hangs a core for two seconds.
      const std::size_t waiting = state.waiting_locked();
      closes_only = waiting != 0 && waiting == state.closes_waiting_locked();
      armed = state.wake.fd() >= 0 && (waiting == 0 || closes_only) && state.arm_locked();
      if (armed) {
        slept = state.wake.enter_sleep();
      }
    }
    const auto limit = timeout_ms < 0 ? std::chrono::nanoseconds(std::chrono::seconds(1))
                                      : std::chrono::nanoseconds(deadline - Clock::now());
    if (armed) {
      sleep_on(state.efd, state.wake.fd(),
               closes_only ? std::min<std::chrono::nanoseconds>(limit, kClosePollingSleep) : limit);
    } else {
      sleep_on(-1, -1, std::min<std::chrono::nanoseconds>(limit, kPollingSleep));
    }
  }
}

// kClosed for `call` on a worker that stop() or its destructor is ending.
tl::unexpected<Error> being_destroyed(const Worker::State& state, const char* call) {
  return make_unexpected(
      ErrorCode::kClosed,
      std::string("ucx ") + call +
          (state.stopped ? ": the worker was stopped" : ": the worker is being destroyed"));
}

// kNotSupported for `call` on a forked child's copy of its parent's worker.
tl::unexpected<Error> forked_copy(const char* call) {
  return tl::unexpected<Error>(Worker::forked_copy_error(std::string("ucx ") + call));
}

// kResourceExhausted for `call`, or without a message when even that does not fit.
tl::unexpected<Error> out_of_host_memory(const char* call) noexcept {
  try {
    return make_unexpected(ErrorCode::kResourceExhausted,
                           std::string("ucx ") + call + ": out of host memory");
  } catch (...) {
    return make_unexpected(Error{ErrorCode::kResourceExhausted, {}, 0});
  }
}

// Runs `body` on the worker's state, or refuses `call` when a move took the state away. A
// template, not a std::function: the hot calls (send, receive, progress) pay only the null test.
// The heap's refusal is an error like any other: every step leaves the state whole when an
// allocation throws (each send still ends as one SendResult), so the call reports it instead of
// throwing it at a caller that expects errors as values.
template <class Body>
auto with_state(const std::unique_ptr<Worker::State>& state, const char* call, Body&& body)
    -> decltype(body(*state)) {
  try {
    if (state == nullptr) {
      return make_unexpected(ErrorCode::kInvalidArgument,
                             std::string("ucx ") + call + ": the worker was moved from");
    }
    if (state->forked_copy()) {
      return forked_copy(call);
    }
    const holoscan::detail::CallUnderWay inside(&state->calls);
    if (ending(*state)) {
      return being_destroyed(*state, call);
    }
    return body(*state);
  } catch (const std::bad_alloc&) {
    return out_of_host_memory(call);
  }
}

template <class T>
struct is_expected : std::false_type {};
template <class T, class E>
struct is_expected<tl::expected<T, E>> : std::true_type {};

// For the calls that report no error: a moved-from worker, or one being destroyed (asked by a
// deleter its destructor ran), gives the empty answer (nullopt, 0, false, zero counters).
template <class Body>
auto with_state(const std::unique_ptr<Worker::State>& state, Body&& body)
    -> decltype(body(*state)) {
  static_assert(!is_expected<decltype(body(*state))>::value,
                "a call that reports errors must name itself, to refuse a moved-from worker");
  if (state == nullptr || state->forked_copy()) {
    return {};
  }
  const holoscan::detail::CallUnderWay inside(&state->calls);
  if (ending(*state)) {
    return {};
  }
  return body(*state);
}

// Ends a worker; a forked child's copy is left as it is (fork_watch.hpp): tearing it down would
// close the parent's connections and take UCX handles out of the parent's epoll sets, and
// dropping its claims would run deleters of what the parent still sends. The child's copies of
// the descriptors stay open until it exits or execs.
void end_worker(std::unique_ptr<Worker::State>& state) noexcept {
  if (state == nullptr) {
    return;
  }
  if (state->forked_copy()) {
    (void)state.release();  // NOLINT(bugprone-unused-return-value): left to the child's exit
    return;
  }
  state->end_calls_then_shut_down();
}

}  // namespace

expected<Worker, Error> Worker::create(const WorkerConfig& config) try {
  if (detail::forked_while_a_worker_was_alive()) {
    return make_unexpected(
        ErrorCode::kNotSupported,
        "ucx worker: this process was forked while its parent had a UCX worker, and UCX does not "
        "work in such a child (its connections never complete); start it with exec instead "
        "(Python's multiprocessing: the 'spawn' or 'forkserver' start method)");
  }
  if (config.window == 0) {
    return make_unexpected(ErrorCode::kInvalidArgument, "ucx worker: window must be at least 1");
  }
  if (config.max_waiting_per_peer == 0) {
    return make_unexpected(ErrorCode::kInvalidArgument,
                           "ucx worker: max_waiting_per_peer must be at least 1");
  }
  auto state = std::make_unique<State>(config);
  auto context = detail::create_context();
  if (!context) {
    return forward_error(std::move(context));
  }
  state->context = std::move(*context);
  auto worker = detail::create_worker(state->context.get());
  if (!worker) {
    return forward_error(std::move(worker));
  }
  state->worker = std::move(worker->worker);
  state->efd = worker->efd;
  auto loop_fd = detail::EventLoopFd::make(state->efd);
  if (!loop_fd) {
    return forward_error(std::move(loop_fd));
  }
  state->loop_fd = std::move(*loop_fd);
  state->max_am_header = worker->max_am_header;
  if (state->max_am_header < kMaxTensorHeaderBytes) {
    return make_unexpected(
        ErrorCode::kNotImplemented,
        "ucx worker: UCX allows active message headers of " + std::to_string(state->max_am_header) +
            " bytes, the protocol needs " + std::to_string(kMaxTensorHeaderBytes));
  }
  if (auto registered = state->register_handlers(); !registered) {
    return forward_error(std::move(registered));
  }
  return Worker(std::move(state));
} catch (const std::bad_alloc&) {
  return out_of_host_memory("worker");
}

Worker::Worker(std::unique_ptr<State> state) noexcept : state_(std::move(state)) {}
Worker::Worker(Worker&& other) noexcept = default;

Worker& Worker::operator=(Worker&& other) noexcept {
  if (this != &other) {
    end_worker(state_);
    state_ = std::move(other.state_);
  }
  return *this;
}

Worker::~Worker() { end_worker(state_); }

void Worker::stop() noexcept {
  if (state_ == nullptr || state_->forked_copy()) {
    return;  // nothing to stop; a forked child's copy is the parent's (end_worker)
  }
  // Under the mutex, as the destructor marks the end: every call that changes the worker looks
  // at the end once it holds the mutex, so its work either ran before this or does not run. The
  // bare mutex, not a StateLock: that one's end drops the claims set aside, running producers'
  // deleters on this thread. The event loop is told too (fd() says -1 from now on). Counted like
  // every call: a destructor begun meanwhile waits for it before the state goes.
  const holoscan::detail::CallUnderWay inside(&state_->calls);
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->stopped = true;
  state_->calls.end();
  state_->announce();
}

// Refuses new calls, wakes the threads asleep in a wait (they return kClosed or no answer), waits
// for every call under way to return (the deleters its drops run included), then ends the worker.
// A call blocked on the mutex finishes its work first, on a worker that is still whole. The calls
// that deleters run by the shutdown make are refused, and waited for too before the state goes.
void Worker::State::end_calls_then_shut_down() noexcept {
  {
    StateLock lock(*this);
    calls.end();
    wake.post();
  }
  calls.wait();
  {
    StateLock lock(*this);
    shut_down();
  }
  calls.wait();
}

expected<std::uint16_t, Error> Worker::listen(const std::string& address, std::uint16_t port) {
  return with_state(state_, "listen", [&](State& state) {
    const std::string who = "ucx listen on " + address + ":" + std::to_string(port);
    // Resolved before the mutex is taken: a name server may take seconds to answer.
    const auto resolved = resolve_address(who, address, port, true);
    StateLock lock(state);
    if (ending(state)) {
      return expected<std::uint16_t, Error>(being_destroyed(state, "listen"));  // while it resolved
    }
    return state.listen_locked(who, resolved);
  });
}

expected<PeerId, Error> Worker::connect(const std::string& address, std::uint16_t port,
                                        int timeout_ms) {
  return with_state(state_, "connect", [&](State& state) -> expected<PeerId, Error> {
    const std::string name = address + ":" + std::to_string(port);
    const std::string who = "ucx connect to " + name;
    // Resolved before the mutex is taken: a name server may take seconds to answer.
    auto resolved = resolve_address(who, address, port, false);
    if (!resolved) {
      return forward_error(std::move(resolved));
    }
    PeerId id = 0;
    {
      StateLock lock(state);
      if (ending(state)) {
        return being_destroyed(state, "connect");  // while it resolved
      }
      auto started = state.start_connect(name, *resolved);
      if (!started) {
        return started;
      }
      id = *started;
    }
    // Out of host memory in a round of the wait (another peer's work, or a tensor the listener
    // sent first), connect() fails with kResourceExhausted: its connection ends too, or it would
    // stay up with neither side knowing it (no id for the caller, what the listener sent held
    // for a connect() that never returns).
    struct Abandon {
      State& state;
      PeerId id;
      bool armed = true;
      ~Abandon() {
        if (!armed || state.forked_copy()) {
          return;  // a child's copy: the parent's UCX (and mutex) are not this process's
        }
        StateLock lock(state);
        if (Peer* peer = state.find(id); peer != nullptr && peer->connecting) {
          try {
            state.abandon_connect(*peer);
          } catch (...) {
            // Still out of memory: the peer is marked failed, and a later round ends it.
          }
        }
      }
    } abandon{state, id};
    auto answered = wait_for(state, timeout_ms, [&]() -> std::optional<expected<PeerId, Error>> {
      Peer& peer = *state.find(id);
      if (peer.hello_version && *peer.hello_version == kWireVersion) {
        state.finish_connect(peer);
        return expected<PeerId, Error>(id);
      }
      if (peer.hello_version) {
        const std::string version = std::to_string(*peer.hello_version);
        state.abandon_connect(peer);
        return expected<PeerId, Error>(make_unexpected(
            ErrorCode::kIncompatible, who + ": the listener speaks wire version " + version +
                                          ", this build " + std::to_string(kWireVersion)));
      }
      if (peer.lost) {
        state.abandon_connect(peer);
        return expected<PeerId, Error>(
            make_unexpected(ErrorCode::kClosed, who + ": the connection failed"));
      }
      return std::nullopt;
    });
    abandon.armed = false;
    if (answered) {
      return std::move(*answered);
    }
    if (state.forked_copy()) {
      // A fork() from a deleter the wait ran: the child's copy ends the call without touching
      // the parent's UCX (its endpoint, its sockets) or its mutex, as every call on a forked copy
      // does.
      return forked_copy("connect");
    }
    StateLock lock(state);
    state.abandon_connect(*state.find(id));
    if (ending(state)) {
      return being_destroyed(state, "connect");
    }
    return make_unexpected(ErrorCode::kTimeout,
                           who + ": no answer within " + std::to_string(timeout_ms) + " ms");
  });
}

std::optional<PeerId> Worker::accept(int timeout_ms) {
  return with_state(state_, [&](State& state) -> std::optional<PeerId> {
    try {
      return wait_for(state, timeout_ms, [&]() -> std::optional<PeerId> {
        if (state.accepted.empty()) {
          return std::nullopt;
        }
        const PeerId id = state.accepted.front();
        state.accepted.pop_front();
        return id;
      });
    } catch (const std::bad_alloc&) {
      // A round's bookkeeping ran out of host memory: what it had not done yet is done by a
      // later round (a connection request stays queued); this call reports none.
      return std::nullopt;
    }
  });
}

expected<void, Error> Worker::disconnect(PeerId id) {
  return with_state(state_, "disconnect", [&](State& state) -> expected<void, Error> {
    StateLock lock(state);
    if (ending(state)) {
      return being_destroyed(state, "disconnect");  // stopped since the call began
    }
    Peer* peer = state.find(id);
    if (peer == nullptr && state.closed(id)) {
      return {};  // ended and forgotten: nothing more of it to report
    }
    if (peer == nullptr || !peer->handed_out()) {
      return make_unexpected(ErrorCode::kNotFound, "ucx disconnect: no peer " + std::to_string(id));
    }
    if (!peer->lost) {
      try {
        state.lose_peer(*peer, Error{ErrorCode::kClosed, "ucx: disconnected by this worker", 0},
                        false);
      } catch (...) {
        // Out of host memory partway: lost whole by the next round instead (what ended stays
        // ended, the rest ends then), still without a report to receive().
        state.lose_untold_next_round(*peer, Peer::Untold::kDisconnected, "was disconnected here");
        throw;
      }
    }
    // Also when UCX had reported it lost before: receive() reports nothing more of it.
    state.drop_arrivals(id, State::Dropping::kEverything);
    state.sweep_ended();
    // Its sends ended here, and its close is polled by the rounds: an event loop asleep on fd()
    // must wake for both.
    state.announce();
    return {};
  });
}

expected<std::uint64_t, Error> Worker::send(PeerId peer, const Tensor& tensor) {
  return with_state(state_, "send", [&](State& state) -> expected<std::uint64_t, Error> {
    StateLock lock(state);
    if (ending(state)) {
      return being_destroyed(state, "send");  // stopped since the call began
    }
    const std::size_t results_before = state.results.size();
    auto sent = state.send_locked(peer, tensor);
    state.flush_controls();
    state.sweep_ended();
    // Results this call queued (a send UCX refused at once), or work it left for a round (a
    // connection to end, an outcome to record): an event loop asleep on fd() must see them, as
    // no UCX event will say so. A send held for its readiness announced itself already.
    if (state.peers_failed || state.unended_sends || state.results.size() != results_before) {
      state.announce();
    }
    return sent;
  });
}

std::optional<SendResult> Worker::next_send_result() {
  return with_state(state_, [&](State& state) -> std::optional<SendResult> {
    StateLock lock(state);
    if (state.results.empty()) {
      return std::nullopt;
    }
    SendResult result = std::move(state.results.front());
    state.results.pop_front();
    return result;
  });
}

expected<std::optional<Received>, Error> Worker::receive(int timeout_ms) {
  using Answer = expected<std::optional<Received>, Error>;
  return with_state(state_, "receive", [&](State& state) -> Answer {
    // The delivery Ack goes out with the next progress round (progress(), send(), or a receive()
    // that finds nothing landed): a tensor the caller sends in reply leaves first, and the tensors
    // of a backlog, handed out here without a round, are confirmed by one Ack.
    std::optional<expected<Received, Error>> taken;
    {
      StateLock lock(state);
      if (ending(state)) {
        return being_destroyed(state, "receive");  // stopped since the call began
      }
      taken = state.take_arrival();
    }
    if (!taken) {
      taken = wait_for(state, timeout_ms, [&] { return state.take_arrival(); });
    }
    if (!taken) {
      if (ending(state)) {
        return being_destroyed(state, "receive");
      }
      if (state.forked_copy()) {
        return forked_copy("receive");  // a deleter the wait ran forked: this is the child
      }
      return std::optional<Received>();
    }
    if (!*taken) {
      return forward_error(std::move(*taken));
    }
    return std::optional<Received>(std::move(**taken));
  });
}

expected<std::size_t, Error> Worker::progress() {
  return with_state(state_, "progress", [&](State& state) -> expected<std::size_t, Error> {
    StateLock lock(state);
    if (ending(state)) {
      return being_destroyed(state, "progress");  // stopped since the call began
    }
    // The event loop is awake. Another thread's progress() says nothing of it: the loop may still
    // be asleep on fd(), and work queued later must still signal it.
    if (std::this_thread::get_id() == state.event_loop_thread) {
      state.armed_for_caller = false;
    }
    return state.progress_locked();
  });
}

int Worker::fd() const noexcept {
  // -1 as well while the destructor ends it: UCX's fd in the set is closed with the UCX worker.
  return state_ != nullptr && !state_->calls.ending() && !state_->forked_copy()
             ? state_->loop_fd.fd()
             : -1;
}

bool Worker::arm() {
  return with_state(state_, [&](State& state) {
    StateLock lock(state);
    state.event_loop_thread = std::this_thread::get_id();
    // A signal left on fd() would make every sleep end at once: it is taken here. Work announced
    // since the loop last looked (signalled, or noted while nobody was asleep) means no sleep now.
    const bool signalled = state.loop_fd.take_signal();
    if (signalled || state.announced_unarmed) {
      state.announced_unarmed = false;
      state.armed_for_caller = false;
      return false;
    }
    state.armed_for_caller = state.arm_locked();
    return state.armed_for_caller;
  });
}

std::size_t Worker::in_flight() const noexcept {
  return with_state(state_, [&](State& state) {
    StateLock lock(state);
    std::size_t count = 0;
    for (const auto& [id, peer] : state.peers) {
      count += state.in_flight_locked(peer);
    }
    return count;
  });
}

std::size_t Worker::in_flight(PeerId id) const noexcept {
  return with_state(state_, [&](State& state) {
    StateLock lock(state);
    auto found = state.peers.find(id);
    return found == state.peers.end() ? 0 : state.in_flight_locked(found->second);
  });
}

std::size_t Worker::waiting() const noexcept {
  return with_state(state_, [&](State& state) {
    StateLock lock(state);
    return state.waiting_locked();
  });
}

bool Worker::connected(PeerId id) const noexcept {
  return with_state(state_, [&](State& state) {
    StateLock lock(state);
    auto found = state.peers.find(id);
    // A connect() under way, or one that failed, has given the caller no id: not a connection;
    // nor is one a disconnect() ended, out of memory partway (the next round finishes either).
    return found != state.peers.end() && found->second.handed_out() && !found->second.gone();
  });
}

bool Worker::is_forked_copy() const noexcept { return state_ != nullptr && state_->forked_copy(); }

Error Worker::forked_copy_error(const std::string& call) {
  return Error{ErrorCode::kNotSupported,
               call +
                   ": this worker is a forked child's copy of its parent's (UCX does not "
                   "survive fork(): its connections are the parent's to use)",
               0};
}

WorkerStats Worker::stats() const noexcept {
  return with_state(state_, [&](State& state) {
    StateLock lock(state);
    return state.stats;
  });
}

// One round: UCX's own progress (callbacks run in it), then what the callbacks left to do.
std::size_t Worker::State::progress_locked() {
  // The round is counted first: what UCX's callbacks note during it (a landing that failed) is of
  // this round. One call of UCX's progress a round: a second, which for an answer that just came
  // would find nothing, costs an empty epoll_wait on its way (0.4 us of a 4 KiB tcp ping-pong's
  // 6.6 one way); what came meanwhile is found by the next round, and arm_locked() makes sure of
  // it before a sleep.
  ++rounds;
  std::size_t done = ucp_worker_progress(worker.get());
  try {
    done += accept_connections();
    done += handle_failures();
    done += post_ready_sends();
    done += land_arrivals();
    done += flush_controls();
    done += handle_failures();  // an answer that could not go out in this round ends its peer now
    done += end_unended();
    done += finish_orderly_closes(false);
  } catch (...) {
    // Out of host memory part way: what UCX's progress and the steps before did is told all the
    // same (a later round does the rest).
    tell_round_done(done);
    throw;
  }
  const bool failed_before = peers_failed;
  drain_closing();
  // A small message UCX failed needs another round (handle_failures): an event loop asleep on
  // fd() while another thread made this one must be told.
  done += !failed_before && peers_failed ? 1 : 0;
  sweep_ended();
  tell_round_done(done);
  return done;
}

// The threads asleep in a wait may have waited for what a round did. An event loop gets it at
// once only from its own round: another thread's round took UCX's events off efd (ucp_worker_arm
// then finds none), and the loop, between its receive() and its arm(), or asleep on fd(), would
// otherwise sleep on with a tensor landed or a send ended.
void Worker::State::tell_round_done(std::size_t done) noexcept {
  if (done == 0) {
    return;
  }
  if (std::this_thread::get_id() == event_loop_thread) {
    wake.post();
  } else {
    announce();
  }
}

// Work of the worker's own that no event announces (a confirmation queued by a receive() that
// made no round, a lost peer to handle, ...) means progress first: sleeping on the fd would hold
// it back, and a sender whose window it fills would wait for ever.
bool Worker::State::arm_locked() {
  if (!controls.empty() || !connection_requests.empty() || peers_failed || unended_sends) {
    return false;
  }
  // UCX arms a worker only once its progress has found nothing (ucp.h): a round calls it once,
  // and a transport whose arm does not look at completions already queued (RDMA's completion
  // queues) would otherwise let the thread sleep past them. Anything it finds now means another
  // round instead of a sleep.
  if (const unsigned progressed = ucp_worker_progress(worker.get()); progressed != 0) {
    tell_round_done(progressed);
    return false;
  }
  return ucp_worker_arm(worker.get()) == UCS_OK;
}

std::size_t Worker::State::waiting_locked() const noexcept {
  std::size_t count = 0;
  for (const auto& [id, peer] : peers) {
    for (const auto& send : peer.outgoing) {
      count += send->phase == Outgoing::Phase::kHeld && !send->ended ? 1 : 0;
    }
  }
  for (const auto& arrival : arrivals) {
    count += arrival->phase == Arrival::Phase::kWaitingMemory && !arrival->behind_its_peer ? 1 : 0;
  }
  return count + closes_waiting_locked() + (peers_failed ? 1 : 0) + (unended_sends ? 1 : 0);
}

// The closes among waiting_locked(): orderly ones waiting for their peer (until their limit), and
// a while after each close, for UCX's teardown.
std::size_t Worker::State::closes_waiting_locked() const noexcept {
  const bool closes_polled = Clock::now() < closes_polled_until;
  return flushing.size() + (closes_polled ? std::max<std::size_t>(closing.size(), 1) : 0);
}

// Work queued outside a progress round (a confirmation, a send held for its readiness), or done
// in another thread's round, that the event loop must see: whoever sleeps on the worker's behalf
// must wake. The threads asleep in a wait of this worker sleep on the wake signal too; an event
// loop that arm() let sleep on fd() is signalled there (once: it then arms again, taking the
// signal), and one awake finds the note at its next arm().
void Worker::State::announce() noexcept {
  wake.post();
  if (!armed_for_caller) {
    announced_unarmed = true;
  } else {
    armed_for_caller = false;
    loop_fd.signal();
  }
}

Peer* Worker::State::find(PeerId id) noexcept {
  auto found = peers.find(id);
  return found == peers.end() ? nullptr : &found->second;
}

Peer* Worker::State::find(ucp_ep_h endpoint) noexcept {
  auto found = by_endpoint.find(endpoint);
  return found == by_endpoint.end() ? nullptr : find(found->second);
}

}  // namespace holoscan::ucx
