// ucx.Worker: listens and connects, sends Tensors (or anything as_tensor takes) and receives them.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <utility>

#include <holoscan/tensor_pool.hpp>
#include <holoscan/ucx/worker.hpp>

#include "bindings.hpp"
#include "cast_arg.hpp"
#include "endpoint.hpp"
#include "errors.hpp"
#include "python_release.hpp"
#include "ucx_bindings.hpp"
#include "without_gil.hpp"

namespace nb = nanobind;

namespace holoscan::python {
namespace {

constexpr const char* kWorker = "ucx.Worker";
// The C++ defaults (16 in flight, 4 GiB, 1,024 waiting per peer, 1 ms of polling, the stream
// hint on), as the keyword defaults.
const std::size_t kWindow = ucx::WorkerConfig{}.window;
const std::uint64_t kMaxReceiveBytes = ucx::WorkerConfig{}.max_receive_bytes;
const std::size_t kMaxWaitingPerPeer = ucx::WorkerConfig{}.max_waiting_per_peer;
const int kSpinUs = ucx::WorkerConfig{}.spin_us;
const bool kStreamBandwidthHint = ucx::WorkerConfig{}.stream_bandwidth_hint;

using WorkerHandle = SharedHandle<ucx::Worker>;

// The worker's reference to its receive pool's Python object. nanobind's shared_ptr from a Python
// object drops that reference with PyGILState_Ensure wherever its last copy goes, and that is the
// worker's destruction, without the GIL (close(), or the last call under way): on a daemon thread
// once finalization has begun, the wait for the GIL ends the thread with pthread_exit(), whose
// forced unwinding through noexcept destructors aborts the process. So the reference goes as an
// import's producer does (python_release.hpp): at once where the GIL is held, else queued for a
// Python thread, leaked once Python is exiting; never a wait for the GIL.
struct PoolReference final : PythonRelease {
  PyObject* object = nullptr;  // strong reference

  static void run_release(PythonRelease* node, bool python_alive) noexcept {
    auto* reference = static_cast<PoolReference*>(node);
    if (python_alive) {
      ErrorIndicatorGuard keep_callers_error;
      running_python([&] { Py_XDECREF(reference->object); });  // see running_python
    }
    delete reference;
  }
};

std::shared_ptr<TensorPool> receive_pool_of(nb::handle pool) {
  TensorPool* cpp = nullptr;
  if (!nb::try_cast<TensorPool*>(pool, cpp) || cpp == nullptr) {
    throw nb::type_error("receive_pool must be None or a TensorPool");
  }
  auto* reference = new PoolReference();
  reference->run = &PoolReference::run_release;
  reference->object = pool.inc_ref().ptr();
  // The deleter runs once, also when the control block cannot be allocated (the GIL is held then).
  return std::shared_ptr<TensorPool>(
      cpp, [reference](TensorPool*) noexcept { release_with_python(reference); });
}

constexpr const char* kPortRange = "0 to 65535";

// The constructor's or create()'s signature (`head` up to its parameters, `returns` after them)
// with the C++ defaults written in: nb::sig is text, and defaults typed by hand could drift from
// WorkerConfig{}. (The integers are objects, read by named_integer; the stubs say int.)
std::string worker_signature(const char* head, const char* returns) {
  return std::string(head) + "*, window: int = " + std::to_string(kWindow) +
         ", receive_pool: holoscan_dlpack._core.TensorPool | None = None, "
         "max_receive_bytes: int = " +
         std::to_string(kMaxReceiveBytes) +
         ", max_waiting_per_peer: int = " + std::to_string(kMaxWaitingPerPeer) +
         ", spin_us: int = " + std::to_string(kSpinUs) +
         ", stream_bandwidth_hint: bool = " + (kStreamBandwidthHint ? "True" : "False") + ") -> " +
         returns;
}

WorkerHandle create(nb::handle window, nb::handle receive_pool, nb::handle max_receive_bytes,
                    nb::handle max_waiting_per_peer, nb::handle spin_us,
                    nb::handle stream_bandwidth_hint) {
  constexpr const char* kCreate = "ucx.Worker";
  ucx::WorkerConfig config;
  config.window = named_integer<std::size_t>(window, kCreate, "window", "1 to 2**64-1");
  config.max_receive_bytes =
      named_integer<std::uint64_t>(max_receive_bytes, kCreate, "max_receive_bytes", "0 to 2**64-1");
  config.max_waiting_per_peer = named_integer<std::size_t>(max_waiting_per_peer, kCreate,
                                                           "max_waiting_per_peer", "1 to 2**64-1");
  config.spin_us = named_integer<int>(spin_us, kCreate, "spin_us", "a 32-bit integer");
  if (!receive_pool.is_none()) {
    config.receive_pool = receive_pool_of(receive_pool);
  }
  config.stream_bandwidth_hint = bool_argument(stream_bandwidth_hint, "stream_bandwidth_hint");
  return WorkerHandle(std::make_shared<ucx::Worker>(
      value_or_raise(without_gil([&] { return ucx::Worker::create(config); }))));
}

std::uint16_t listen(WorkerHandle& self, const std::string& address, nb::handle port_arg) {
  const auto port = named_integer<std::uint16_t>(port_arg, "ucx.Worker.listen", "port", kPortRange);
  return value_or_raise(self.call_without_gil(
      kWorker, [&](ucx::Worker& worker) { return worker.listen(address, port); }));
}

ucx::PeerId connect(WorkerHandle& self, const std::string& address, nb::handle port_arg,
                    nb::handle timeout_arg) {
  constexpr const char* kConnect = "ucx.Worker.connect";
  const auto port = named_integer<std::uint16_t>(port_arg, kConnect, "port", kPortRange);
  const int timeout_ms = hello_timeout(timeout_arg, kConnect, "timeout_ms");
  return value_or_raise(self.call_without_gil(
      kWorker, [&](ucx::Worker& worker) { return worker.connect(address, port, timeout_ms); }));
}

nb::object accept(WorkerHandle& self, nb::handle timeout_ms) {
  const std::optional<int> limit = wait_timeout(timeout_ms, "ucx.Worker.accept");
  const WorkerHandle::Held held = self.hold(kWorker);
  // A forked child's copy answers accept() with nobody at once (it has no error to give), which
  // the slices below would ask again for ever without a limit: its refusal (NotSupportedError)
  // comes from progress(), as every other call's does.
  if (const auto progressed = held.call([](ucx::Worker& worker) { return worker.progress(); });
      !progressed && progressed.error().code == ErrorCode::kNotSupported) {
    raise_error(progressed.error());
  }
  return wait_in_slices(limit, [&](int slice_ms) -> nb::object {
    const std::optional<ucx::PeerId> peer =
        held.call([&](ucx::Worker& worker) { return worker.accept(slice_ms); });
    return peer ? nb::int_(*peer) : nb::object();
  });
}

nb::object receive(WorkerHandle& self, nb::handle timeout_ms) {
  const std::optional<int> limit = wait_timeout(timeout_ms, "ucx.Worker.receive");
  const WorkerHandle::Held held = self.hold(kWorker);
  return wait_in_slices(limit, [&](int slice_ms) -> nb::object {
    std::optional<ucx::Received> got =
        value_or_raise(held.call([&](ucx::Worker& worker) { return worker.receive(slice_ms); }));
    return got ? nb::cast(std::move(*got)) : nb::object();
  });
}

std::uint64_t send(WorkerHandle& self, nb::handle peer_arg, nb::handle object) {
  (void)self.get(kWorker);  // a closed worker is reported before the tensor is looked at
  const ucx::PeerId peer = peer_argument(peer_arg, "ucx.Worker.send");
  const Tensor tensor = tensor_argument(object, std::nullopt);
  return value_or_raise(self.call_without_gil(
      kWorker, [&](ucx::Worker& worker) { return worker.send(peer, tensor); }));
}

void disconnect(WorkerHandle& self, nb::handle peer_arg) {
  (void)self.get(kWorker);  // as send: a closed worker is reported first
  const ucx::PeerId peer = peer_argument(peer_arg, "ucx.Worker.disconnect");
  auto closed =
      self.call_without_gil(kWorker, [&](ucx::Worker& worker) { return worker.disconnect(peer); });
  if (!closed) {
    raise_error(closed.error());
  }
}

std::size_t progress(WorkerHandle& self) {
  return value_or_raise(
      self.call_without_gil(kWorker, [](ucx::Worker& worker) { return worker.progress(); }));
}

// The worker for a query the C++ API answers without an error (in_flight, connected, stats...):
// a forked child's copy answers those as an empty worker would (no sends, nobody connected),
// which Python code could not tell from an idle worker; it raises NotSupportedError instead, as
// every other call on it does.
std::shared_ptr<ucx::Worker> queried(WorkerHandle& self, const char* query) {
  std::shared_ptr<ucx::Worker> worker = self.get(kWorker);
  if (worker->is_forked_copy()) {
    raise_error(ucx::Worker::forked_copy_error(query));
  }
  return worker;
}

// The peer is read before the worker is looked up: its __index__ is Python code, which could
// close the worker (then ClosedError, and the last reference never dropped here with the GIL).
std::size_t in_flight(WorkerHandle& self, nb::handle peer) {
  const std::optional<ucx::PeerId> id = optional_peer_argument(peer, "ucx.Worker.in_flight");
  std::shared_ptr<ucx::Worker> worker = queried(self, "ucx.Worker.in_flight");
  return id ? worker->in_flight(*id) : worker->in_flight();
}

void bind_connections(nb::class_<WorkerHandle>& type) {
  type.def("listen", &listen, nb::arg("address") = "0.0.0.0", nb::arg("port").none() = 0, Entry(),
           nb::sig("def listen(self, address: str = '0.0.0.0', port: int = 0) -> int"),
           "Listens on `address` (\"0.0.0.0\", an interface's address, \"::\") and `port` (0: "
           "any) and returns the port bound. One listener per worker: DuplicateNameError for a "
           "second, InvalidArgumentError for an address UCX cannot use.")
      .def("connect", &connect, nb::arg("address"), nb::arg("port").none(),
           nb::arg("timeout_ms").none() = 5000, Entry(),
           nb::sig("def connect(self, address: str, port: int, timeout_ms: int = 5000) -> int"),
           "Connects to a listening worker, waits up to `timeout_ms` (without the GIL) for its "
           "Hello and returns the peer's id. ClosedError when nobody listens there, "
           "HoloscanTimeoutError, IncompatibleError for another wire version; "
           "InvalidArgumentError for a negative timeout (no signal interrupts this wait).")
      .def("accept", &accept, nb::arg("timeout_ms") = nb::none(), Entry(),
           nb::sig("def accept(self, timeout_ms: int | None = None) -> int | None"),
           "The next peer the listener accepted, or None when none came within `timeout_ms` "
           "(None or negative: no limit; 0: only what is there). Waits without the GIL; Ctrl-C "
           "interrupts it.")
      .def("disconnect", &disconnect, nb::arg("peer").none(), Entry(),
           nb::sig("def disconnect(self, peer: int) -> None"),
           "Closes a connection: UCX finishes what it moves in later rounds, for up to a "
           "second (waiting() counts it), then a peer that stalls is cut off; its sends in "
           "flight end failed (ClosedError). NotFoundError for an unknown peer (also the id of "
           "a connect() under way on another thread).")
      .def(
          "connected",
          [](WorkerHandle& self, nb::handle peer) {
            const ucx::PeerId id = peer_argument(peer, "ucx.Worker.connected");  // see in_flight
            return queried(self, "ucx.Worker.connected")->connected(id);
          },
          nb::arg("peer").none(), Entry(), nb::sig("def connected(self, peer: int) -> bool"),
          "Whether `peer` is connected (known, not lost or closed).");
}

void bind_transfers(nb::class_<WorkerHandle>& type) {
  type.def("send", &send, nb::arg("peer").none(), nb::arg("tensor").none(), Entry(),
           nb::sig("def send(self, peer: int, tensor: object) -> int"),
           "Sends `tensor` (a Tensor, or anything as_tensor takes: its readiness is its "
           "producer's current work) to `peer` and returns its sequence number (1, 2, ... per "
           "peer); never waits: the data leaves once the tensor's readiness point has passed. "
           "Every send ends as one SendResult (next_send_result()). BackpressuredError when "
           "`window` sends to the peer are in flight, NotFoundError for an unknown peer, "
           "ClosedError for a lost one, HoloscanNotImplementedError for a tensor that is not "
           "contiguous or lives where UCX does not move memory.")
      .def(
          "next_send_result",
          [](WorkerHandle& self) {
            return queried(self, "ucx.Worker.next_send_result")->next_send_result();
          },
          Entry(), "The next SendResult, in the order the sends ended; None when none is waiting.")
      .def("receive", &receive, nb::arg("timeout_ms") = nb::none(), Entry(),
           nb::sig("def receive(self, timeout_ms: int | None = None) -> Received | None"),
           "The next arrival (a Received: peer, sequence, tensor), or None when none came within "
           "`timeout_ms` (None or negative: no limit; 0: only what is there); handing it out "
           "confirms it to its sender. Waits without the GIL; Ctrl-C interrupts it. A refused "
           "message raises its error here (InvalidArgumentError, ProtocolError, ...), a peer "
           "that disconnected or died ClosedError, each once, in arrival order; the worker "
           "stays usable.")
      .def("progress", &progress, Entry(),
           "Progresses UCX, sends what became ready, lands what found memory; never blocks. "
           "Returns how many things happened.");
}

void bind_state(nb::class_<WorkerHandle>& type) {
  type.def("fileno", &WorkerHandle::fileno, Entry(),
           "The descriptor to sleep on (UCX's event fd and the worker's own signal), readable when "
           "progress() has something to do (arm() first); "
           "-1 once closed.")
      .def_prop_ro("fd", &WorkerHandle::fileno, Entry(), "Same as fileno().")
      .def(
          "arm", [](WorkerHandle& self) { return queried(self, "ucx.Worker.arm")->arm(); }, Entry(),
          "Prepares fileno() for a wait: True when it is safe to sleep on it now, False when "
          "progress() has work first.")
      .def("in_flight", &in_flight, nb::arg("peer") = nb::none(), Entry(),
           nb::sig("def in_flight(self, peer: int | None = None) -> int"),
           "Sends in flight (not yet ended as a SendResult) to `peer`, or to every peer.")
      .def(
          "waiting",
          [](WorkerHandle& self) { return queried(self, "ucx.Worker.waiting")->waiting(); },
          Entry(),
          "Sends held for readiness, arrivals held for memory and closes under way: poll "
          "progress() meanwhile.")
      .def(
          "stats", [](WorkerHandle& self) { return queried(self, "ucx.Worker.stats")->stats(); },
          Entry(), "The counters so far.");
}

}  // namespace

void bind_ucx_worker(nb::module_& module) {
  nb::class_<WorkerHandle> type(
      module, "Worker",
      "A UCX worker: listens and connects, sends Tensors to its peers and receives theirs. Data "
      "leaves only once it is ready; the worker holds each tensor sent until UCX is done with "
      "its memory; every send ends as exactly one SendResult. Received tensors land in memory "
      "the receiver owns (receive_pool's blocks, else host memory). Thread-safe.");
  // Kept for the module's life: nanobind keeps the signatures' text by pointer.
  static const std::string init_signature = worker_signature("def __init__(self, ", "None");
  static const std::string create_signature = worker_signature("def create(", "Worker");
  type.def(
          "__init__",
          [](WorkerHandle* self, nb::handle window, nb::handle receive_pool,
             nb::handle max_receive_bytes, nb::handle max_waiting_per_peer, nb::handle spin_us,
             nb::handle stream_bandwidth_hint) {
            new (self) WorkerHandle(create(window, receive_pool, max_receive_bytes,
                                           max_waiting_per_peer, spin_us, stream_bandwidth_hint));
          },
          nb::kw_only(), nb::arg("window").none() = kWindow, nb::arg("receive_pool") = nb::none(),
          nb::arg("max_receive_bytes").none() = kMaxReceiveBytes,
          nb::arg("max_waiting_per_peer").none() = kMaxWaitingPerPeer,
          nb::arg("spin_us").none() = kSpinUs,
          nb::arg("stream_bandwidth_hint").none() = kStreamBandwidthHint, Entry(),
          nb::sig(init_signature.c_str()),
          "A worker on a fresh UCX context: `window` sends in flight per peer; received "
          "tensors land in blocks of `receive_pool` (a TensorPool, host or device), else in a "
          "host allocation each, up to `max_receive_bytes`; a peer's tensors past "
          "`max_waiting_per_peer` not yet received are refused (BackpressuredError at its "
          "sender); waits poll for `spin_us` before they sleep; with `stream_bandwidth_hint`, a "
          "send posted while an earlier one to its "
          "peer is still moving (and a landing started while another lands) asks UCX for "
          "bandwidth (UCP_OP_ATTR_FLAG_MULTI_SEND), a lone send never does.")
      .def_static("create", &create, nb::kw_only(), nb::arg("window").none() = kWindow,
                  nb::arg("receive_pool") = nb::none(),
                  nb::arg("max_receive_bytes").none() = kMaxReceiveBytes,
                  nb::arg("max_waiting_per_peer").none() = kMaxWaitingPerPeer,
                  nb::arg("spin_us").none() = kSpinUs,
                  nb::arg("stream_bandwidth_hint").none() = kStreamBandwidthHint, Entry(),
                  nb::sig(create_signature.c_str()), "Same as the constructor (the C++ name).");
  bind_connections(type);
  bind_transfers(type);
  bind_state(type);
  def_closable(type, "def __enter__(self) -> Worker",
               "Stops the worker at once (a wait under way on another thread ends with "
               "ClosedError), then closes every connection (flushing for up to a second, without "
               "the GIL); sends in flight end failed. Memory UCX may still read is kept until it "
               "lets go.");
}

}  // namespace holoscan::python
