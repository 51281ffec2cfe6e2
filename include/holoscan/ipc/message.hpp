#pragma once
/**
 * @file
 * @brief The messages of the cross-process tensor protocol: Hello, Publish and Release.
 */
#include <array>
#include <cstdint>
#include <utility>
#include <variant>
#include <vector>

#include "holoscan/export.hpp"
#include "holoscan/ipc/descriptor.hpp"
#include "holoscan/ipc/fd.hpp"

namespace holoscan::ipc {

/** @brief The channel protocol version that Hello carries; a peer with another one is refused.
 *         Version 2: a Hello proves its sender (a pidfd and the kernel's credentials). */
inline constexpr std::uint32_t kProtocolVersion = 2;

/**
 * @brief The first message each side sends: who it is, and its protocol version.
 *
 * Channel::send attaches the sending process's own pidfd (SCM_RIGHTS) and its credentials
 * (SCM_CREDENTIALS, checked by the kernel); Channel::receive accepts the Hello only when that
 * pidfd names the live process the kernel says sent it, and hands it over in `process`. That is
 * the process to watch: not Channel::peer_pid(), which names whoever made the socket.
 */
struct HOLOSCAN_DLPACK_API Hello {
  /** @brief A Hello with pid 0, which no peer accepts. */
  Hello() = default;
  /** @brief A Hello from `sender_pid`, speaking `version`, with `sender` as its pidfd. */
  Hello(std::uint32_t sender_pid, std::uint32_t version, UniqueFd sender = UniqueFd()) noexcept
      : pid(sender_pid), protocol_version(version), process(std::move(sender)) {}

  std::uint32_t pid =
      0;  ///< The sender's own view of its pid (another number in another pid namespace).
  std::uint32_t protocol_version = kProtocolVersion;  ///< Must equal kProtocolVersion.
  UniqueFd process;  ///< Received: the sender's pidfd, checked. Ignored on send.
};

/** @brief An export offered to the peer: an encoded TensorDescriptor, and its memory's fd. */
struct HOLOSCAN_DLPACK_API Publish {
  std::vector<std::uint8_t> descriptor;  ///< encode() output; receive() has validated it.
  UniqueFd fd;  ///< Held exactly when handle_kind is kPosixFd; send() lends it, receive() gives it.
};

/** @brief The importer is done with an export once `event` (when present) has completed. */
struct HOLOSCAN_DLPACK_API Release {
  std::uint64_t export_id = 0;  ///< TensorDescriptor::export_id of the export given back.
  bool has_event = false;       ///< Whether `event` holds a handle; without one, done already.
  std::array<std::uint8_t, kIpcHandleBytes> event{};  ///< cudaIpcEventHandle_t bytes, else zero.
};

/** @brief One framed message of the protocol. */
using Message = std::variant<Hello, Publish, Release>;

}  // namespace holoscan::ipc
