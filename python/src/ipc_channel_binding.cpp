// ipc.Channel and ipc.Listener: the sockets an Exporter and an Importer talk over.
#include <fcntl.h>
#include <unistd.h>

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>

#include <cerrno>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <utility>

#include "bindings.hpp"
#include "cast_arg.hpp"
#include "endpoint.hpp"
#include "errors.hpp"
#include "ipc_bindings.hpp"
#include "no_pickling.hpp"

namespace nb = nanobind;

namespace holoscan::python {
namespace {

constexpr const char* kChannel = "ipc.Channel";
constexpr const char* kListener = "ipc.Listener";

using ListenerHandle = SharedHandle<ipc::Listener>;

Error system_failure(const char* call, int err) {
  return Error{ErrorCode::kFailure,
               std::string(kChannel) + ": " + call + " failed: " +
                   std::generic_category().message(err) + " (errno " + std::to_string(err) + ")",
               0};
}

// A close-on-exec duplicate of `fd`: the caller's descriptor stays as it was until we succeed.
ipc::UniqueFd duplicate(int fd) {
  ipc::UniqueFd copy(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
  if (!copy.valid()) {
    raise_error(system_failure("fcntl(F_DUPFD_CLOEXEC)", errno));
  }
  return copy;
}

ipc::Channel& open_channel(ChannelHandle& self) {
  if (!self.channel) {
    raise_closed(kChannel);
  }
  return *self.channel;
}

std::pair<ChannelHandle, ChannelHandle> make_pair() {
  auto ends = value_or_raise(ipc::Channel::pair());
  return {ChannelHandle{std::move(ends.first)}, ChannelHandle{std::move(ends.second)}};
}

// A listener whose backlog is full makes connect() wait: in slices, so that a signal
// (KeyboardInterrupt) ends a wait without a limit too.
nb::object connect(const std::string& path, nb::handle timeout_arg) {
  const std::optional<int> timeout_ms = wait_timeout(timeout_arg, "ipc.Channel.connect");
  nb::object connected = wait_in_slices(timeout_ms, [&](int slice_ms) -> nb::object {
    auto channel = without_gil([&] { return ipc::Channel::connect(path, slice_ms); });
    if (!channel && channel.error().code == ErrorCode::kTimeout) {
      return nb::object();  // still full: the next slice, or the end of the wait
    }
    return nb::cast(ChannelHandle{value_or_raise(std::move(channel))});
  });
  if (connected.is_none()) {
    raise_error(Error{ErrorCode::kTimeout,
                      "ipc channel: connect to " + path +
                          ": the listener's backlog stayed full for " +
                          std::to_string(*timeout_ms) + " ms",
                      0});
  }
  return connected;
}

// Takes `fd` over: on success it is closed (the channel holds a close-on-exec duplicate, so that
// a later exec does not leak it); on a refusal it is left open, the caller's.
// A number that is no open descriptor is the caller's argument, refused as C++'s adopt refuses an
// invalid one (InvalidArgumentError), not a failure of the system.
ChannelHandle adopt(nb::handle fd_arg) {
  // Named and never a bool: adopt(True) would take over (and close) descriptor 1, stdout.
  const int fd = named_integer<int>(fd_arg, "ipc.Channel.adopt", "fd", "a 32-bit descriptor");
  if (fd < 0 || (::fcntl(fd, F_GETFD) == -1 && errno == EBADF)) {
    raise_error(Error{ErrorCode::kInvalidArgument,
                      "ipc channel: adopt needs a connected AF_UNIX SOCK_SEQPACKET socket (" +
                          std::to_string(fd) + " is no open file descriptor)",
                      0});
  }
  ChannelHandle handle{value_or_raise(ipc::Channel::adopt(duplicate(fd)))};
  ::close(fd);
  return handle;
}

int detach(ChannelHandle& self) {
  ipc::UniqueFd copy = duplicate(open_channel(self).fd());
  self.channel.reset();
  return copy.release();
}

nb::object accept(ListenerHandle& self, nb::handle timeout_ms) {
  const std::optional<int> limit = wait_timeout(timeout_ms, "ipc.Listener.accept");
  const ListenerHandle::Held held = self.hold(kListener);
  return wait_in_slices(limit, [&](int slice_ms) -> nb::object {
    std::optional<ipc::Channel> accepted = value_or_raise(
        held.call([&](ipc::Listener& listener) { return listener.accept(slice_ms); }));
    return accepted ? nb::cast(ChannelHandle{std::move(accepted)}) : nb::object();
  });
}

ListenerHandle listen(const std::string& path) {
  return ListenerHandle(
      std::make_shared<ipc::Listener>(value_or_raise(ipc::Listener::listen(path))));
}

std::string channel_repr(const ChannelHandle& self) {
  return self.channel ? "<Channel fd=" + std::to_string(self.channel->fd()) + ">"
                      : std::string("<Channel closed>");
}

void bind_channel(nb::module_& module) {
  nb::class_<ChannelHandle> type(
      module, "Channel",
      "One connected end of a message channel (a Unix SOCK_SEQPACKET socket). An Exporter or "
      "Importer takes it over; to hand one to another process, pass it to a multiprocessing "
      "child (it is pickled as a duplicate of its descriptor) or pass fileno() in pass_fds and "
      "adopt() it there.");
  type.def_static("pair", &make_pair, Entry(),
                  "Two connected ends, one for this process and one for a child it starts.")
      .def_static("connect", &connect, nb::arg("path"), nb::arg("timeout_ms") = nb::none(), Entry(),
                  nb::sig("def connect(path: str, timeout_ms: int | None = None) -> Channel"),
                  "Connects to the Listener bound at `path`. While its backlog is full (a "
                  "listener that does not accept), waits up to `timeout_ms` (None: no limit), "
                  "then raises HoloscanTimeoutError.")
      .def_static("adopt", &adopt, nb::arg("fd").none(), Entry(),
                  nb::sig("def adopt(fd: int) -> Channel"),
                  "Takes over `fd`, a connected AF_UNIX SOCK_SEQPACKET socket (one inherited, or "
                  "a multiprocessing duplicate): it is closed, and the channel holds a "
                  "close-on-exec duplicate. A refused fd is left open.")
      .def("fileno", &ChannelHandle::fileno, Entry(),
           "The socket's descriptor, owned by the channel; -1 once closed.")
      .def_prop_ro("fd", &ChannelHandle::fileno, Entry(), "Same as fileno().")
      .def("detach", &detach, Entry(),
           "Closes the channel and returns a close-on-exec duplicate of its socket, now the "
           "caller's (the peer sees no hang-up).")
      .def_prop_ro(
          "peer_pid",
          [](ChannelHandle& self) { return value_or_raise(open_channel(self).peer_pid()); },
          Entry(),
          "The peer's pid when the socket was connected (for pair(): the creating process).")
      .def(
          "__reduce_ex__",
          [](ChannelHandle&, int) -> nb::object {
            throw nb::type_error(
                "a Channel is pickled only by multiprocessing (a Process argument, a Queue or a "
                "Pipe), which hands the other process a duplicate of its socket; elsewhere pass "
                "fileno() (pass_fds) and Channel.adopt() it there");
          },
          nb::arg("protocol"), "Refuses pickling outside multiprocessing (see the message).")
      .def("__repr__", &channel_repr, Entry());
  def_closable(type, "def __enter__(self) -> Channel",
               "Closes the socket (the peer then reads end-of-file); again, nothing happens.");
}

void bind_listener(nb::module_& module) {
  nb::class_<ListenerHandle> type(module, "Listener",
                                  "A listening socket bound at a path, which accepts Channels.");
  refuse_pickling(type, "Listener");
  type.def(nb::new_(&listen), nb::arg("path"), Entry(),
           "Binds and listens at `path`, which must not exist yet.")
      .def_static("listen", &listen, nb::arg("path"), Entry(), "Same as the constructor.")
      .def("accept", &accept, nb::arg("timeout_ms") = nb::none(), Entry(),
           nb::sig("def accept(self, timeout_ms: int | None = None) -> Channel | None"),
           "The next connection, or None when none came within `timeout_ms` (None or "
           "negative: no limit). Waits without the GIL; Ctrl-C interrupts it.")
      .def("fileno", &ListenerHandle::fileno, Entry(),
           "The listening socket's descriptor (readable: a connection is waiting); -1 once "
           "closed.")
      .def_prop_ro("fd", &ListenerHandle::fileno, Entry(), "Same as fileno().")
      .def_prop_ro(
          "path", [](ListenerHandle& self) { return self.get(kListener)->path(); }, Entry(),
          "The bound path.");
  def_closable(type, "def __enter__(self) -> Listener",
               "Closes the socket and removes the path (in the process that bound it).");
}

}  // namespace

ipc::Channel ChannelHandle::take(const char* taker) {
  if (!channel) {
    raise_error(Error{ErrorCode::kClosed,
                      std::string(taker) + ": the Channel is closed (close() ran, or an Exporter "
                                           "or Importer took it)",
                      0});
  }
  ipc::Channel taken = std::move(*channel);
  channel.reset();
  return taken;
}

void bind_ipc_channels(nb::module_& module) {
  bind_channel(module);
  bind_listener(module);
}

}  // namespace holoscan::python
