// ipc.Exporter: publishes Tensors (or anything as_tensor takes) to importers in other processes.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>

#include <cstdint>
#include <memory>
#include <optional>

#include <holoscan/ipc/exporter.hpp>

#include "bindings.hpp"
#include "endpoint.hpp"
#include "errors.hpp"
#include "ipc_bindings.hpp"
#include "no_pickling.hpp"
#include "stream_arg.hpp"

namespace nb = nanobind;

namespace holoscan::python {
namespace {

constexpr const char* kExporter = "ipc.Exporter";

using ExporterHandle = SharedHandle<ipc::Exporter>;

ExporterHandle create() {
  return ExporterHandle(std::make_shared<ipc::Exporter>(value_or_raise(ipc::Exporter::create())));
}

ipc::PeerId add_peer(ExporterHandle& self, ChannelHandle& channel, nb::handle timeout_arg) {
  const int hello_timeout_ms =
      hello_timeout(timeout_arg, "ipc.Exporter.add_peer", "hello_timeout_ms");
  (void)self.get(kExporter);  // a closed exporter leaves the channel to the caller
  ipc::Channel taken = channel.take("ipc.Exporter.add_peer");
  return value_or_raise(self.call_without_gil(kExporter, [&](ipc::Exporter& exporter) {
    return exporter.add_peer(std::move(taken), hello_timeout_ms);
  }));
}

std::uint64_t publish(ExporterHandle& self, nb::handle peer_arg, nb::handle object,
                      nb::handle stream) {
  (void)self.get(kExporter);  // a closed exporter is reported before the arguments are looked at
  const ipc::PeerId peer = peer_argument(peer_arg, "ipc.Exporter.publish");
  std::optional<cudaStream_t> on;
  if (!stream.is_none()) {
    on = parse_stream(stream);
  }
  const Tensor tensor = tensor_argument(object, on);
  return value_or_raise(self.call_without_gil(kExporter, [&](ipc::Exporter& exporter) {
    // Recorded on `stream` even for an import (whose readiness is its producer's current work
    // stream): the caller names the stream that wrote the tensor.
    return on ? exporter.publish(peer, tensor, *on) : exporter.publish(peer, tensor);
  }));
}

std::size_t poll(ExporterHandle& self) {
  return value_or_raise(
      self.call_without_gil(kExporter, [](ipc::Exporter& exporter) { return exporter.poll(); }));
}

// The peer is read before the exporter is looked up: its __index__ is Python code, which could
// close the exporter (then ClosedError, and the last reference never dropped here with the GIL).
std::size_t held(ExporterHandle& self, nb::handle peer) {
  const std::optional<ipc::PeerId> id = optional_peer_argument(peer, "ipc.Exporter.held");
  std::shared_ptr<ipc::Exporter> exporter = self.get(kExporter);
  return id ? exporter->held(*id) : exporter->held();
}

void bind_stats(nb::module_& module) {
  nb::class_<ipc::ExporterStats>(module, "ExporterStats", "Counters of an Exporter.")
      .def_ro("published", &ipc::ExporterStats::published, "Exports sent.")
      .def_ro("releases", &ipc::ExporterStats::releases, "Release messages received.")
      .def_ro("dropped", &ipc::ExporterStats::dropped,
              "Claims dropped (released and done, or the peer exited).")
      .def_ro("ignored_releases", &ipc::ExporterStats::ignored_releases,
              "Releases naming no claim of their peer.")
      .def_ro("refused_messages", &ipc::ExporterStats::refused_messages,
              "Frames refused, or messages an importer never sends.")
      .def_ro("unopenable_events", &ipc::ExporterStats::unopenable_events,
              "Release events that could not be opened.")
      .def_ro("fds_sent", &ipc::ExporterStats::fds_sent,
              "Publishes that carried their memory's file descriptor.")
      .def_ro("refused_exports", &ipc::ExporterStats::refused_exports,
              "Exports a peer refused (given back unimported).");
}

}  // namespace

void bind_ipc_exporter(nb::module_& module) {
  bind_stats(module);
  nb::class_<ExporterHandle> type(
      module, "Exporter",
      "Publishes tensors to importers in other processes and holds each export's memory until "
      "its importer is done with it, or has died. Thread-safe. Call poll() when fileno() is "
      "readable, and every millisecond or so while held() is not zero.");
  refuse_pickling(type, "Exporter");
  type.def(nb::new_(&create), Entry(), "An exporter with no peers.")
      .def_static("create", &create, Entry(), "Same as the constructor.")
      .def("add_peer", &add_peer, nb::arg("channel"), nb::arg("hello_timeout_ms").none() = 5000,
           Entry(),
           nb::sig("def add_peer(self, channel: Channel, hello_timeout_ms: int = 5000) -> int"),
           "Takes `channel` over (it is closed on failure), exchanges Hello without the GIL and "
           "returns the peer's id. HoloscanTimeoutError without a Hello in time, ClosedError if "
           "the peer hung up, IncompatibleError for another protocol version or a peer that is an "
           "Exporter too; "
           "InvalidArgumentError for a negative timeout (no signal interrupts this wait).")
      .def("publish", &publish, nb::arg("peer").none(), nb::arg("tensor").none(),
           nb::arg("stream") = nb::none(), Entry(),
           nb::sig("def publish(self, peer: int, tensor: object, stream: object | None = None) "
                   "-> int"),
           "Exports `tensor` (a Tensor, or anything as_tensor takes) to `peer` and returns the "
           "export id; never waits. The importer's readiness event is recorded on `stream` "
           "(None: the tensor's readiness stream; a stream object or a handle, 0 the null "
           "stream). Device memory only: a shareable TensorPool's, or cudaMalloc's. "
           "NotReadyError when the peer's socket is full (poll(), then retry), ClosedError once "
           "the peer hung up or left, NotFoundError for an unknown peer, InvalidArgumentError "
           "for memory that cannot be shared.")
      .def("poll", &poll, Entry(),
           "Reads the peers' messages and drops the claims whose release completed, without "
           "the GIL; never blocks. Returns how many it dropped.")
      .def("fileno", &ExporterHandle::fileno, Entry(),
           "An epoll descriptor, readable when a peer sent something or hung up; -1 once "
           "closed.")
      .def_prop_ro("fd", &ExporterHandle::fileno, Entry(), "Same as fileno().")
      .def("held", &held, nb::arg("peer") = nb::none(), Entry(),
           nb::sig("def held(self, peer: int | None = None) -> int"),
           "Claims held for `peer`, or for every peer.")
      .def(
          "connected",
          [](ExporterHandle& self, nb::handle peer) {
            const ipc::PeerId id = peer_argument(peer, "ipc.Exporter.connected");  // see held
            return self.get(kExporter)->connected(id);
          },
          nb::arg("peer").none(), Entry(), nb::sig("def connected(self, peer: int) -> bool"),
          "Whether `peer` was added and has not been seen to hang up.")
      .def(
          "stats", [](ExporterHandle& self) { return self.get(kExporter)->stats(); }, Entry(),
          "The counters so far.");
  def_closable(type, "def __enter__(self) -> Exporter",
               "Closes every channel. Claims of departed peers drop; memory a live peer may still "
               "read is kept until this process exits (poll until held() is 0 first).");
}

}  // namespace holoscan::python
