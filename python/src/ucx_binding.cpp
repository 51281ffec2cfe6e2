// holoscan_dlpack._core.ucx, re-exported as holoscan_dlpack.ucx (python/holoscan_dlpack/ucx.py):
// the submodule, and what a Worker hands back (send results, arrivals, counters).
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <string>

#include <holoscan/ucx/worker.hpp>

#include "bindings.hpp"
#include "errors.hpp"
#include "ucx_bindings.hpp"

namespace nb = nanobind;

namespace holoscan::python {
namespace {

// The error's message may hold what a peer sent, which need not be UTF-8.
nb::str repr(const ucx::SendResult& result) {
  std::string text = "SendResult(peer=" + std::to_string(result.peer) +
                     ", sequence=" + std::to_string(result.sequence);
  return message_text(text + (result.outcome
                                  ? ", delivered)"
                                  : ", error=" + to_string(result.outcome.error()) + ")"));
}

void bind_send_result(nb::module_& module) {
  nb::class_<ucx::SendResult>(module, "SendResult",
                              "What became of one send(): delivered (the peer's receive() handed "
                              "it out), or the error that ended it.")
      .def_ro("peer", &ucx::SendResult::peer, "The peer it went to.")
      .def_ro("sequence", &ucx::SendResult::sequence, "What send() returned.")
      .def_prop_ro(
          "delivered", [](const ucx::SendResult& r) { return r.outcome.has_value(); }, Entry(),
          "Whether the peer confirmed it.")
      .def_prop_ro(
          "error",
          [](const ucx::SendResult& r) {
            return r.outcome ? nb::none() : exception_for(r.outcome.error());
          },
          Entry(), nb::sig("def error(self) -> Exception | None"),
          "None when delivered, else the exception (a holoscan_dlpack.errors class, not raised) "
          "of the error that ended it: ClosedError when the connection broke, the receiver's "
          "refusal otherwise.")
      .def("__repr__", &repr, Entry());
}

void bind_received(nb::module_& module) {
  nb::class_<ucx::Received>(module, "Received",
                            "A tensor that arrived, with the peer that sent it.")
      .def_ro("peer", &ucx::Received::peer, "The connection it came on.")
      .def_ro("sequence", &ucx::Received::sequence,
              "The sender's sequence number (what its send() returned).")
      .def_ro("tensor", &ucx::Received::tensor, Entry(),
              nb::sig("def tensor(self) -> holoscan_dlpack._core.Tensor"),
              "The Tensor: writable, compact, in receiver-owned memory, complete (no wait).")
      .def(
          "__repr__",
          [](const ucx::Received& r) {
            return "Received(peer=" + std::to_string(r.peer) +
                   ", sequence=" + std::to_string(r.sequence) + ")";
          },
          Entry());
}

void bind_stats(nb::module_& module) {
  using Stats = ucx::WorkerStats;
  nb::class_<Stats>(module, "WorkerStats", "Counters of a Worker.")
      .def_ro("sent", &Stats::sent, "Tensors accepted by send().")
      .def_ro("delivered", &Stats::delivered, "Sent tensors the peer confirmed.")
      .def_ro("failed", &Stats::failed, "Sent tensors reported failed (refused, closed, error).")
      .def_ro("received", &Stats::received, "Tensors handed out by receive().")
      .def_ro("refused", &Stats::refused, "Incoming messages refused (each answered, if possible).")
      .def_ro("ignored_acks", &Stats::ignored_acks, "Acks naming nothing in flight, or malformed.")
      .def_ro("answers_carried", &Stats::answers_carried,
              "Confirmations sent in a tensor's header instead of an Ack of their own.")
      .def_ro("peers_accepted", &Stats::peers_accepted, "Connections accepted by the listener.")
      .def_ro("peers_lost", &Stats::peers_lost,
              "Connections that failed or were closed by the peer.")
      .def_ro("readiness_waits", &Stats::readiness_waits,
              "Sends held back until their readiness point passed.")
      .def_ro("memory_waits", &Stats::memory_waits,
              "Arrivals that waited for a free receive_pool block.")
      .def_ro("landings_kept", &Stats::landings_kept,
              "Failed landings whose memory is kept until the process exits: the peer's "
              "transport (CUDA IPC, RDMA) may still be writing into it.")
      .def_ro("sends_kept", &Stats::sends_kept,
              "Sends failed after they were posted whose memory is kept until the process "
              "exits: the peer's transport (CUDA IPC, RDMA) may still be reading it.");
}

}  // namespace

void bind_ucx_results(nb::module_& module) {
  bind_send_result(module);
  bind_received(module);
  bind_stats(module);
}

void bind_ucx(nb::module_& module) {
  nb::module_ ucx = module.def_submodule(
      "ucx",
      "Tensors across hosts over UCX (holoscan::ucx): a Worker listens or connects, sends "
      "Tensors to its peers and receives theirs into memory it owns.");
  ucx.attr("UCX_LIBRARY_DIR") = HOLOSCAN_DLPACK_UCX_LIBRARY_DIR;
  bind_ucx_results(ucx);
  bind_ucx_worker(ucx);
}

}  // namespace holoscan::python
