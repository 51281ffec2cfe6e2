#pragma once
// holoscan_dlpack._core.ipc: holoscan::ipc for Python, one file per endpoint. Every object
// closes explicitly (close(), or a with block) or when it is collected; a blocking call holds its
// own reference, so that a close() from another thread never frees what the call still uses.
#include <nanobind/nanobind.h>

#include <optional>

#include <holoscan/ipc/channel.hpp>

namespace holoscan::python {

/** @brief A Python Channel: the socket until it is closed or handed to an endpoint. */
struct ChannelHandle {
  std::optional<ipc::Channel> channel;  ///< Empty once closed or taken.

  /** @brief The channel, for an endpoint to take; ClosedError when there is none. */
  ipc::Channel take(const char* taker);
  /** @brief Closes the socket, if still held. */
  void close() noexcept { channel.reset(); }
  /** @brief Whether the socket is gone (closed, detached or taken). */
  bool closed() const noexcept { return !channel; }
  /** @brief The socket's descriptor, or -1 once it is gone (as socket.fileno()). */
  int fileno() const noexcept { return channel ? channel->fd() : -1; }
};

/** @brief Creates the submodule `ipc` of `module` and binds every endpoint in it. */
void bind_ipc(nanobind::module_& module);

/** @brief Binds Channel and Listener. */
void bind_ipc_channels(nanobind::module_& module);

/** @brief Binds Exporter and ExporterStats. */
void bind_ipc_exporter(nanobind::module_& module);

/** @brief Binds Importer and ImporterStats. */
void bind_ipc_importer(nanobind::module_& module);

}  // namespace holoscan::python
