#include "ipc/transport/ipc_handshake.hpp"

#include <unistd.h>

#include <new>
#include <string>
#include <variant>

#include "ipc/ipc_error.hpp"
#include "ipc/transport/ipc_poll.hpp"

namespace holoscan::ipc::detail {
namespace {

// "an Exporter" or "an Importer", for messages.
const char* role_name(PeerRole role) noexcept {
  return role == PeerRole::kExporter ? "an Exporter" : "an Importer";
}

// exchange_hello(), but out of memory (building a refusal's message) throws.
expected<Hello, Error> exchange_or_throw(Channel& channel, int timeout_ms, const char* who,
                                         PeerRole mine) {
  const Deadline deadline(timeout_ms);
  if (auto sent = channel.send(
          Hello{static_cast<std::uint32_t>(::getpid()), kProtocolVersion, UniqueFd(), mine},
          deadline.remaining_ms());
      !sent) {
    return make_unexpected(std::move(sent.error()));
  }
  auto received = channel.receive(deadline.remaining_ms());
  if (!received) {
    // As the channel says: kIncompatible for another protocol version, kInvalidArgument for a
    // malformed Hello (or descriptors the kernel could not pass), kPermissionDenied for a proof
    // that fails.
    return make_unexpected(std::move(received.error()));
  }
  if (!*received) {
    return make_unexpected(
        ErrorCode::kTimeout,
        std::string(who) + ": no Hello from the peer within " + std::to_string(timeout_ms) + " ms");
  }
  if (auto* hello = std::get_if<Hello>(&**received)) {
    if (hello->role == mine) {
      const char* other =
          role_name(mine == PeerRole::kExporter ? PeerRole::kImporter : PeerRole::kExporter);
      return make_unexpected(ErrorCode::kIncompatible, std::string(who) + ": the peer is " +
                                                           role_name(mine) + " too; the peer of " +
                                                           role_name(mine) + " must be " + other);
    }
    return std::move(*hello);
  }
  return make_unexpected(ErrorCode::kIncompatible,
                         std::string(who) + ": the peer's first message is not a Hello");
}

}  // namespace

expected<Hello, Error> exchange_hello(Channel& channel, int timeout_ms, const char* who,
                                      PeerRole mine) {
  try {
    return exchange_or_throw(channel, timeout_ms, who, mine);
  } catch (const std::bad_alloc&) {
    return make_unexpected(out_of_memory(who));
  }
}

}  // namespace holoscan::ipc::detail
