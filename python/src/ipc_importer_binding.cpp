// ipc.Importer: receives the tensors one exporter publishes, as read-only Tensors.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <utility>

#include <holoscan/ipc/importer.hpp>

#include "bindings.hpp"
#include "endpoint.hpp"
#include "errors.hpp"
#include "ipc_bindings.hpp"
#include "text_arg.hpp"

namespace nb = nanobind;

namespace holoscan::python {
namespace {

constexpr const char* kImporter = "ipc.Importer";

// Importer::receive is for one thread at a time; Python threads may call it together. The lock
// is waited for within the slice's time only: a receive(timeout_ms=0) must not wait out another
// thread's slice (up to 100 ms) before it looks.
struct ImporterState {
  explicit ImporterState(ipc::Importer taken) noexcept : importer(std::move(taken)) {}
  int fd() const noexcept { return importer.fd(); }
  // close(): another thread's receive() ends at once (SharedHandle::let_go).
  void stop() noexcept { importer.stop(); }
  ipc::Importer importer;
  std::timed_mutex receiving;
};

using ImporterHandle = SharedHandle<ImporterState>;

// 'gpu', 'host' or a ReadinessWait itself (not whatever the enum caster converts: True, 1).
ipc::ReadinessWait parse_readiness(nb::handle readiness) {
  if (nb::isinstance<nb::str>(readiness)) {
    const std::optional<std::string> name = utf8_text(readiness);  // none: no name of ours
    if (name == "gpu") return ipc::ReadinessWait::kOnGpu;
    if (name == "host") return ipc::ReadinessWait::kOnHost;
    raise_invalid_argument("ipc.Importer: readiness must be 'gpu' or 'host', not " +
                           display_text(nb::repr(readiness)));
  }
  if (!nb::isinstance<ipc::ReadinessWait>(readiness)) {
    throw nb::type_error("ipc.Importer: readiness must be 'gpu', 'host' or a ReadinessWait");
  }
  return nb::cast<ipc::ReadinessWait>(readiness);
}

ImporterHandle create(ChannelHandle& channel, nb::handle timeout_arg, nb::handle readiness) {
  ipc::ImporterOptions options;
  options.hello_timeout_ms = hello_timeout(timeout_arg, kImporter, "hello_timeout_ms");
  options.readiness = parse_readiness(readiness);
  ipc::Channel taken = channel.take("ipc.Importer");
  return ImporterHandle(std::make_shared<ImporterState>(value_or_raise(
      without_gil([&] { return ipc::Importer::create(std::move(taken), options); }))));
}

nb::object receive(ImporterHandle& self, nb::handle timeout_ms) {
  const std::optional<int> limit = wait_timeout(timeout_ms, "ipc.Importer.receive");
  const ImporterHandle::Held held = self.hold(kImporter);
  return wait_in_slices(limit, [&](int slice_ms) -> nb::object {
    std::optional<Tensor> received = value_or_raise(held.call([&](ImporterState& state) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(slice_ms);
      std::unique_lock<std::timed_mutex> lock(state.receiving, until);
      if (!lock.owns_lock()) {
        // Another thread receives: nothing came to this one within the slice.
        return expected<std::optional<Tensor>, Error>(std::optional<Tensor>());
      }
      // Rounded up: a slice cut to receive(0) would spin through the last millisecond.
      const auto left =
          std::chrono::ceil<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
      return state.importer.receive(static_cast<int>(std::max<std::int64_t>(left.count(), 0)));
    }));
    return received ? nb::cast(std::move(*received)) : nb::object();
  });
}

void poll(ImporterHandle& self) {
  auto sent =
      self.call_without_gil(kImporter, [](ImporterState& state) { return state.importer.poll(); });
  if (!sent) {
    raise_error(sent.error());
  }
}

// One of the importer's const queries, as a method of the handle.
template <typename Value>
auto query(Value (ipc::Importer::*read)() const noexcept) {
  return [read](ImporterHandle& self) { return (self.get(kImporter)->importer.*read)(); };
}

void bind_stats(nb::module_& module) {
  nb::class_<ipc::ImporterStats>(module, "ImporterStats", "Counters of an Importer.")
      .def_ro("imported", &ipc::ImporterStats::imported, "Tensors imported.")
      .def_ro("refused", &ipc::ImporterStats::refused,
              "Publishes refused (given back at once, unless they repeat an export seen).")
      .def_ro("released", &ipc::ImporterStats::released, "Releases queued for the exporter.")
      .def_ro("release_events", &ipc::ImporterStats::release_events,
              "Releases that carried a GPU event (the rest were done).")
      .def_ro("mappings_opened", &ipc::ImporterStats::mappings_opened,
              "Allocations mapped into this process.")
      .def_ro("fds_received", &ipc::ImporterStats::fds_received,
              "Imports whose memory's fd came with them.")
      .def_ro("held_for_readiness", &ipc::ImporterStats::held_for_readiness,
              "Imports receive() held until their readiness event completed (readiness='host').");
}

}  // namespace

void bind_ipc_importer(nb::module_& module) {
  bind_stats(module);
  nb::enum_<ipc::ReadinessWait>(module, "ReadinessWait",
                                "Where an Importer waits for an exporter's readiness event.")
      .value("kOnGpu", ipc::ReadinessWait::kOnGpu,
             "On the consumers' streams: receive() returns at once; a consumer's stream waits "
             "for the exporter's event (the lowest single-tensor latency without MPS, but a "
             "consumer stream waiting on an exporter killed mid-work never runs again).")
      .value("kOnHost", ipc::ReadinessWait::kOnHost,
             "On this host: receive() holds an import until its event completed (asked, never "
             "waited on), then returns it with its readiness met; no stream waits on another "
             "process (the default: as fast or faster in a pipeline, and an exporter that dies "
             "mid-work stalls nothing).");
  nb::class_<ImporterHandle> type(
      module, "Importer",
      "Receives the tensors one exporter publishes over a channel, as read-only Tensors whose "
      "readiness is the exporter's (waited for here before receive() returns them, or with "
      "readiness='gpu' by the consumers' streams). Call "
      "set_deallocation_stream(s) on a received Tensor after the last work queued on it: its "
      "memory goes back to the exporter, without a host block, once that work is done and its "
      "last owner is gone.");
  type.def(
          "__init__",
          [](ImporterHandle* self, ChannelHandle& channel, nb::handle hello_timeout_ms,
             nb::handle readiness) {
            new (self) ImporterHandle(create(channel, hello_timeout_ms, readiness));
          },
          nb::arg("channel"), nb::arg("hello_timeout_ms").none() = 5000, nb::kw_only(),
          nb::arg("readiness").none() = "host", Entry(),
          nb::sig("def __init__(self, channel: Channel, hello_timeout_ms: int = 5000, *, "
                  "readiness: str | ReadinessWait = 'host') -> None"),
          "Takes `channel` over (it is closed on failure) and exchanges Hello without the GIL. "
          "readiness='host' (ReadinessWait.kOnHost, the default) holds each import until the "
          "exporter's readiness event completed, so that no stream waits on another process (an "
          "exporter that dies mid-work stalls nothing here); 'gpu' returns it at once, its "
          "consumers waiting on the GPU (a lower single-tensor latency without MPS). "
          "HoloscanTimeoutError without a Hello in time, ClosedError if the peer hung "
          "up, IncompatibleError for another protocol version or a peer that is an Importer too; "
          "InvalidArgumentError for a negative timeout (no signal interrupts this wait) or "
          "another readiness name.")
      .def_static("create", &create, nb::arg("channel"), nb::arg("hello_timeout_ms").none() = 5000,
                  nb::kw_only(), nb::arg("readiness").none() = "host", Entry(),
                  nb::sig("def create(channel: Channel, hello_timeout_ms: int = 5000, *, "
                          "readiness: str | ReadinessWait = 'host') -> Importer"),
                  "Same as the constructor.")
      .def("receive", &receive, nb::arg("timeout_ms") = nb::none(), Entry(),
           nb::sig("def receive(self, timeout_ms: int | None = None) -> "
                   "holoscan_dlpack._core.Tensor | None"),
           "The next published Tensor, or None when none came within `timeout_ms` (None or "
           "negative: no limit; 0: only what is there). Waits without the GIL; Ctrl-C "
           "interrupts it. A publish that cannot be imported is given back (unless it repeats an "
           "export seen on this connection) and raised here (the importer stays usable); "
           "ClosedError once the exporter hung up.")
      .def("poll", &poll, Entry(),
           "Sends releases that found the socket full, as far as there is room; never blocks.")
      .def("fileno", &ImporterHandle::fileno, Entry(),
           "The channel's descriptor (readable: receive() will not wait); -1 once closed.")
      .def_prop_ro("fd", &ImporterHandle::fileno, Entry(), "Same as fileno().")
      .def("outstanding", query(&ipc::Importer::outstanding), Entry(),
           "Imports not yet given back.")
      .def("awaiting_readiness", query(&ipc::Importer::awaiting_readiness), Entry(),
           "Imports receive() holds for their readiness now (readiness='host'): while not 0, "
           "an event loop calls receive(timeout_ms=0) every few tens of microseconds besides "
           "waiting on fileno() (a completing event wakes no descriptor).")
      .def("queued_releases", query(&ipc::Importer::queued_releases), Entry(),
           "Releases waiting for room in the socket.")
      .def("cached_mappings", query(&ipc::Importer::cached_mappings), Entry(),
           "Allocations mapped and kept for reuse.")
      .def("stats", query(&ipc::Importer::stats), Entry(), "The counters so far.");
  def_closable(type, "def __enter__(self) -> Importer",
               "Stops receiving at once (a receive() under way on another thread ends with "
               "ClosedError) and lets go of the connection: publishes never received are given "
               "back and no more are taken; it closes once every received Tensor is released.");
}

}  // namespace holoscan::python
