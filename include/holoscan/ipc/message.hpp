#pragma once
/**
 * @file
 * @brief The messages of the cross-process tensor protocol: Hello, Publish and Release.
 */
#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <variant>
#include <vector>

#include "holoscan/export.hpp"
#include "holoscan/ipc/descriptor.hpp"
#include "holoscan/ipc/fd.hpp"

namespace holoscan::ipc {

/** @brief The channel protocol version that Hello carries; a peer with another one is refused.
 *         Version 2: a Hello proves its sender (a pidfd and the kernel's credentials). Version 3:
 *         a Publish carries its memory's fd only the first time its peer sees the allocation,
 *         and says which allocation its peer may unmap; a Release says whether it is a refusal.
 *         Version 4: a Hello says which end its sender is (two Exporters, or two Importers, are
 *         refused instead of publishing into a peer that never releases). */
inline constexpr std::uint32_t kProtocolVersion = 4;

/** @brief Which end of a connection a Hello's sender is: an Exporter's peer is an Importer. */
enum class PeerRole : std::uint32_t {
  kExporter = 1,  ///< Publishes exports, receives Releases.
  kImporter = 2,  ///< Receives Publishes, sends Releases.
};

/** @brief Allocations whose fd an exporter counts as sent, per connection, at most; each
 *         one beyond is made room for by naming the least recently published in
 *         Publish::forget_allocation. */
inline constexpr std::size_t kRememberedAllocations = 64;

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
  /** @brief A Hello from `sender_pid`, speaking `version`, with `sender` as its pidfd, sent by
   *         the `sender_role` end. */
  Hello(std::uint32_t sender_pid, std::uint32_t version, UniqueFd sender = UniqueFd(),
        PeerRole sender_role = PeerRole::kImporter) noexcept
      : pid(sender_pid), protocol_version(version), process(std::move(sender)), role(sender_role) {}

  std::uint32_t pid =
      0;  ///< The sender's own view of its pid (another number in another pid namespace).
  std::uint32_t protocol_version = kProtocolVersion;  ///< Must equal kProtocolVersion.
  UniqueFd process;  ///< Received: the sender's pidfd, checked. Ignored on send.
  PeerRole role = PeerRole::kImporter;  ///< The sender's end; Exporter and Importer check it.
};

/**
 * @brief An export offered to the peer: an encoded TensorDescriptor, and its memory's fd.
 *
 * A kPosixFd allocation with a nonzero allocation id travels with its fd the first time on a
 * connection only: the importer keeps that mapping until a Publish names the allocation in
 * `forget_allocation`, and maps later exports of it from there.
 */
struct HOLOSCAN_DLPACK_API Publish {
  std::vector<std::uint8_t> descriptor;  ///< encode() output; receive() has validated it.
  /** @brief kPosixFd: the memory's fd, left out once the peer has it (nonzero allocation id);
   *         none for kCudaIpc. send() lends it, receive() gives it. */
  UniqueFd fd;
  /** @brief An allocation (not this one) whose fd the sender no longer counts as sent: the
   *         receiver unmaps it (imports keep theirs) and gets its fd again with its next export;
   *         0 for none. */
  std::uint64_t forget_allocation = 0;
};

/** @brief The importer is done with an export once `event` (when present) has completed. */
struct HOLOSCAN_DLPACK_API Release {
  std::uint64_t export_id = 0;  ///< TensorDescriptor::export_id of the export given back.
  bool has_event = false;       ///< Whether `event` holds a handle; without one, done already.
  std::array<std::uint8_t, kIpcHandleBytes> event{};  ///< cudaIpcEventHandle_t bytes, else zero.
  /** @brief The importer refused the export (nothing of it was imported; never with an event):
   *         the exporter sends the allocation's fd again with its next export to this peer. */
  bool refused = false;
};

/** @brief One framed message of the protocol. */
using Message = std::variant<Hello, Publish, Release>;

}  // namespace holoscan::ipc
