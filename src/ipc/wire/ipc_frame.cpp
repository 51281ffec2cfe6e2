// Frames come from another process: each is checked for its length, its type, its payload and
// the number of descriptors that came with it before anything in it is used.
#include "ipc/wire/ipc_frame.hpp"

#include <algorithm>
#include <new>
#include <string>

#include "ipc/ipc_error.hpp"
#include "ipc/wire/ipc_wire.hpp"

namespace holoscan::ipc::detail {
namespace {

enum FrameType : std::uint32_t { kHelloFrame = 1, kPublishFrame = 2, kReleaseFrame = 3 };

constexpr std::size_t kHelloVersionAt = 4;   // where every version's Hello has its version
constexpr std::size_t kHelloBytes = 12;      // u32 pid, u32 protocol version, u32 role; the pidfd
                                             // beside
constexpr std::size_t kReleaseEventAt = 16;  // u64 export id, u8 has_event, u8 refused, 6 zero
constexpr std::size_t kReleaseBytes = kReleaseEventAt + kIpcHandleBytes;

Error invalid(const std::string& what) { return invalid_argument("ipc channel", what); }

// The header of a frame of `payload_bytes` (at most kMaxFrameBytes - kFrameHeaderBytes: callers
// check).
Frame frame(FrameType type, std::size_t payload_bytes) noexcept {
  Frame out;
  out.size = kFrameHeaderBytes + payload_bytes;
  put_u32(out.bytes.data(), type);
  put_u32(out.bytes.data() + 4, static_cast<std::uint32_t>(payload_bytes));
  return out;
}

// How many fds a Publish may carry: kCudaIpc none; kPosixFd one, or none once its peer has it,
// which only a nonzero allocation id can say (id 0 is mapped for one import only).
expected<void, Error> check_publish(const std::uint8_t* descriptor, std::size_t size,
                                    std::size_t fd_count, std::uint64_t forget_allocation) {
  auto decoded = decode(descriptor, size);
  if (!decoded) {
    return make_unexpected(std::move(decoded.error()));
  }
  const std::string which = "publish of export " + std::to_string(decoded->export_id);
  const bool fd_handle = decoded->handle_kind == MemoryHandleKind::kPosixFd;
  const bool cached = fd_handle && decoded->allocation_id != 0;
  if (fd_count > (fd_handle ? 1 : 0) || (fd_handle && !cached && fd_count == 0)) {
    return make_unexpected(invalid(
        which + " carries " + std::to_string(fd_count) + " file descriptors, its handle kind " +
        (cached ? "takes 0 or 1" : fd_handle ? "needs 1" : "needs 0")));
  }
  if (forget_allocation != 0 && forget_allocation == decoded->allocation_id) {
    return make_unexpected(invalid(which + " forgets its own allocation " +
                                   std::to_string(forget_allocation)));
  }
  return {};
}

// A refusal gives back what was never imported: nothing of it to wait for.
expected<void, Error> check_release(bool has_event, bool refused, const std::uint8_t* event) {
  if (has_event && refused) {
    return make_unexpected(invalid("release is a refusal with an event"));
  }
  if (!has_event && !all_zero(event, kIpcHandleBytes)) {
    return make_unexpected(invalid("release event is not all zero while has_event is false"));
  }
  return {};
}

// A Hello's role as the wire carries it: one of PeerRole's two values, on send as on receipt.
expected<void, Error> check_role(std::uint32_t role) {
  if (role != static_cast<std::uint32_t>(PeerRole::kExporter) &&
      role != static_cast<std::uint32_t>(PeerRole::kImporter)) {
    return make_unexpected(invalid("hello role " + std::to_string(role) +
                                   " is neither an Exporter (1) nor an Importer (2)"));
  }
  return {};
}

// The version is checked before the descriptor count, so that a peer of another version is told
// so, whatever its Hello carries.
expected<Message, Error> parse_hello(const std::uint8_t* payload, std::size_t size, UniqueFd* fds,
                                     std::size_t fd_count) {
  // Every version's Hello begins with the pid and the version: a peer of another version (whose
  // Hello has another length) is told so, not that its Hello is malformed.
  if (size < kHelloVersionAt + 4) {
    return make_unexpected(invalid("hello of " + std::to_string(size) + " bytes, expected " +
                                   std::to_string(kHelloBytes)));
  }
  Hello hello{get_u32(payload), get_u32(payload + kHelloVersionAt), UniqueFd()};
  if (hello.protocol_version != kProtocolVersion) {
    // kIncompatible, not kInvalidArgument: the one refusal a handshake reports as "another
    // version", for which a retry cannot help.
    Error error = invalid("peer speaks protocol version " + std::to_string(hello.protocol_version) +
                          ", this build speaks " + std::to_string(kProtocolVersion));
    error.code = ErrorCode::kIncompatible;
    return make_unexpected(std::move(error));
  }
  if (size != kHelloBytes) {
    return make_unexpected(invalid("hello of " + std::to_string(size) + " bytes, expected " +
                                   std::to_string(kHelloBytes)));
  }
  const std::uint32_t role = get_u32(payload + 8);
  if (auto known = check_role(role); !known) {
    return make_unexpected(std::move(known.error()));
  }
  hello.role = static_cast<PeerRole>(role);
  if (hello.pid == 0) {
    return make_unexpected(invalid("hello pid is 0"));
  }
  if (fd_count != 1) {
    return make_unexpected(invalid("hello with " + std::to_string(fd_count) +
                                   " file descriptors, expected 1 (the sender's pidfd)"));
  }
  hello.process = std::move(fds[0]);
  return Message{std::move(hello)};
}

expected<Message, Error> parse_release(const std::uint8_t* payload, std::size_t size,
                                       std::size_t fd_count) {
  if (size != kReleaseBytes || fd_count != 0) {
    return make_unexpected(invalid("release of " + std::to_string(size) + " bytes with " +
                                   std::to_string(fd_count) + " file descriptors, expected " +
                                   std::to_string(kReleaseBytes) + " bytes and none"));
  }
  const std::uint8_t has_event = get_u8(payload + 8);
  const std::uint8_t refused = get_u8(payload + 9);
  if (has_event > 1 || refused > 1) {
    return make_unexpected(invalid("release has_event is " + std::to_string(has_event) +
                                   " and refused " + std::to_string(refused) +
                                   ", each must be 0 or 1"));
  }
  if (!all_zero(payload + 10, kReleaseEventAt - 10)) {
    return make_unexpected(invalid("release reserved bytes are not zero"));
  }
  if (auto ok = check_release(has_event == 1, refused == 1, payload + kReleaseEventAt); !ok) {
    return make_unexpected(std::move(ok.error()));
  }
  Release release;
  release.export_id = get_u64(payload);
  release.has_event = has_event == 1;
  release.refused = refused == 1;
  release.event = get_bytes<kIpcHandleBytes>(payload + kReleaseEventAt);
  return Message{release};
}

expected<Message, Error> parse_publish(const std::uint8_t* payload, std::size_t size, UniqueFd* fds,
                                       std::size_t fd_count) {
  if (size < kPublishHeaderBytes) {
    return make_unexpected(invalid("publish of " + std::to_string(size) + " bytes is shorter than " +
                                   "its " + std::to_string(kPublishHeaderBytes) + "-byte header"));
  }
  const std::uint64_t forget = get_u64(payload);
  const std::uint8_t* descriptor = payload + kPublishHeaderBytes;
  const std::size_t descriptor_size = size - kPublishHeaderBytes;
  if (auto ok = check_publish(descriptor, descriptor_size, fd_count, forget); !ok) {
    return make_unexpected(std::move(ok.error()));
  }
  Publish publish;
  publish.descriptor.assign(descriptor, descriptor + descriptor_size);
  publish.forget_allocation = forget;
  if (fd_count == 1) {
    publish.fd = std::move(fds[0]);
  }
  return Message{std::move(publish)};
}

}  // namespace

expected<Frame, Error> encode_frame(const Hello& hello) {
  if (hello.pid == 0) {
    return make_unexpected(invalid("hello pid is 0"));
  }
  if (auto known = check_role(static_cast<std::uint32_t>(hello.role)); !known) {
    return make_unexpected(std::move(known.error()));
  }
  // The version goes out as given: refusing one it does not speak is the receiver's part.
  auto out = frame(kHelloFrame, kHelloBytes);
  put_u32(out.bytes.data() + kFrameHeaderBytes, hello.pid);
  put_u32(out.bytes.data() + kFrameHeaderBytes + kHelloVersionAt, hello.protocol_version);
  put_u32(out.bytes.data() + kFrameHeaderBytes + 8, static_cast<std::uint32_t>(hello.role));
  return out;
}

expected<Frame, Error> encode_frame(const Publish& publish) {
  const std::size_t fd_count = publish.fd.valid() ? 1 : 0;
  // Checked first: a descriptor that decodes is at most kMaxDescriptorBytes long.
  if (auto ok = check_publish(publish.descriptor.data(), publish.descriptor.size(), fd_count,
                              publish.forget_allocation);
      !ok) {
    return make_unexpected(std::move(ok.error()));
  }
  auto out = frame(kPublishFrame, kPublishHeaderBytes + publish.descriptor.size());
  put_u64(out.bytes.data() + kFrameHeaderBytes, publish.forget_allocation);
  std::copy(publish.descriptor.begin(), publish.descriptor.end(),
            out.bytes.begin() + kFrameHeaderBytes + kPublishHeaderBytes);
  return out;
}

expected<Frame, Error> encode_frame(const Release& release) {
  if (auto ok = check_release(release.has_event, release.refused, release.event.data()); !ok) {
    return make_unexpected(std::move(ok.error()));
  }
  auto out = frame(kReleaseFrame, kReleaseBytes);
  std::uint8_t* payload = out.bytes.data() + kFrameHeaderBytes;
  put_u64(payload, release.export_id);
  put_u8(payload + 8, release.has_event ? 1 : 0);
  put_u8(payload + 9, release.refused ? 1 : 0);
  put_bytes(payload + kReleaseEventAt, release.event);
  return out;
}

std::optional<std::uint64_t> publish_export_id(const std::uint8_t* bytes,
                                               std::size_t size) noexcept {
  constexpr std::size_t kDescriptorAt = kFrameHeaderBytes + kPublishHeaderBytes;
  if (size < kDescriptorAt || get_u32(bytes) != kPublishFrame ||
      get_u32(bytes + 4) != size - kFrameHeaderBytes) {
    return std::nullopt;
  }
  try {
    auto descriptor = decode(bytes + kDescriptorAt, size - kDescriptorAt);
    return descriptor ? std::optional<std::uint64_t>(descriptor->export_id) : std::nullopt;
  } catch (const std::bad_alloc&) {
    // Out of memory (the channel names a Publish it could not parse for want of it, so this
    // decode may fail too): the export id is read from its field, undecoded, so that the export
    // is still given back. A Release naming an id from the exporter's own frame can only end a
    // claim of that exporter; left unnamed, the claim would wait for this process's exit.
    return descriptor_export_id(bytes + kDescriptorAt, size - kDescriptorAt);
  }
}

PublishAllocations publish_allocations(const std::uint8_t* bytes, std::size_t size) noexcept {
  if (!publish_export_id(bytes, size)) {
    return {};
  }
  constexpr std::size_t kDescriptorAt = kFrameHeaderBytes + kPublishHeaderBytes;
  return PublishAllocations{descriptor_fd_allocation(bytes + kDescriptorAt, size - kDescriptorAt),
                            get_u64(bytes + kFrameHeaderBytes)};
}

expected<Message, Error> parse_frame(const std::uint8_t* bytes, std::size_t size, UniqueFd* fds,
                                     std::size_t fd_count) {
  if (size < kFrameHeaderBytes) {
    return make_unexpected(invalid("frame of " + std::to_string(size) + " bytes is shorter than " +
                                   "its " + std::to_string(kFrameHeaderBytes) + "-byte header"));
  }
  const std::uint32_t type = get_u32(bytes);
  const std::uint32_t length = get_u32(bytes + 4);
  if (length != size - kFrameHeaderBytes) {
    return make_unexpected(invalid("frame length field says " + std::to_string(length) +
                                   " payload bytes, the frame has " +
                                   std::to_string(size - kFrameHeaderBytes)));
  }
  const std::uint8_t* payload = bytes + kFrameHeaderBytes;
  switch (type) {
    case kHelloFrame:
      return parse_hello(payload, length, fds, fd_count);
    case kPublishFrame:
      return parse_publish(payload, length, fds, fd_count);
    case kReleaseFrame:
      return parse_release(payload, length, fd_count);
    default:
      return make_unexpected(invalid("frame type " + std::to_string(type) + " is not hello (1), " +
                                     "publish (2) or release (3)"));
  }
}

}  // namespace holoscan::ipc::detail
