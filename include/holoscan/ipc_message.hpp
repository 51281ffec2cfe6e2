#pragma once
/**
 * @file
 * @brief The messages of the cross-process tensor protocol: Hello, Publish and Release.
 */
#include <array>
#include <cstdint>
#include <variant>
#include <vector>

#include "holoscan/detail/abi.hpp"
#include "holoscan/ipc_descriptor.hpp"
#include "holoscan/ipc_fd.hpp"

namespace holoscan::ipc {

/** @brief The channel protocol version that Hello carries; a peer with another one is refused. */
inline constexpr std::uint32_t kProtocolVersion = 1;

/** @brief The first message each side sends: its process id and protocol version. */
struct HOLOSCAN_DLPACK_ABI Hello {
  std::uint32_t pid =
      0;  ///< The sender's own view of its pid; Channel::peer_pid() is the kernel's.
  std::uint32_t protocol_version = kProtocolVersion;  ///< Must equal kProtocolVersion.
};

/** @brief An export offered to the peer: an encoded TensorDescriptor, and its memory's fd. */
struct HOLOSCAN_DLPACK_ABI Publish {
  std::vector<std::uint8_t> descriptor;  ///< encode() output; receive() has validated it.
  UniqueFd fd;  ///< Held exactly when handle_kind is kPosixFd; send() lends it, receive() gives it.
};

/** @brief The importer is done with an export once `event` (when present) has completed. */
struct HOLOSCAN_DLPACK_ABI Release {
  std::uint64_t export_id = 0;  ///< TensorDescriptor::export_id of the export given back.
  bool has_event = false;       ///< Whether `event` holds a handle; without one, done already.
  std::array<std::uint8_t, kIpcHandleBytes> event{};  ///< cudaIpcEventHandle_t bytes, else zero.
};

/** @brief One framed message of the protocol. */
using Message = std::variant<Hello, Publish, Release>;

}  // namespace holoscan::ipc
