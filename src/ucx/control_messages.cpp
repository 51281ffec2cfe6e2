// Ack and Hello, the protocol's small messages. An Ack's code must be one of ErrorCode's values,
// its run of sequence numbers must be one a receiver can have handed out, and its text is bounded,
// so that a peer cannot make the sender report nonsense or hold memory.
#include <cstdint>
#include <string>

#include "byte_cursor.hpp"
#include "holoscan/ucx/wire.hpp"

namespace holoscan::ucx {
namespace {

constexpr std::uint32_t kLastErrorCode = static_cast<std::uint32_t>(ErrorCode::kPreparedStorageInvalid);

Error malformed(const char* who, const std::string& what) {
  return Error{ErrorCode::kProtocolError, std::string(who) + ": " + what, 0};
}

// Magic, version and total length, the preamble every message starts with.
expected<std::uint32_t, Error> check_preamble(const char* who, const std::uint8_t* bytes,
                                              std::size_t size, std::size_t fixed) {
  if (bytes == nullptr || size < fixed) {
    return make_unexpected(malformed(who, std::to_string(size) + " bytes, shorter than the " +
                                              std::to_string(fixed) + "-byte fixed part"));
  }
  detail::ByteReader r(bytes);
  if (r.u32() != kWireMagic) {
    return make_unexpected(malformed(who, "magic is not \"HDLU\""));
  }
  const std::uint32_t version = r.u32();
  if (const std::uint32_t total = r.u32(); total != size) {
    return make_unexpected(malformed(who, "total_length " + std::to_string(total) +
                                              " does not match the " + std::to_string(size) +
                                              " bytes received"));
  }
  return version;
}

// A run the receiver can have handed out: at least one tensor, a refusal names exactly one, and
// the last sequence number is representable.
expected<void, Error> check_run(const char* who, const Ack& ack) {
  if (ack.count == 0 || (ack.code != ErrorCode::kSuccess && ack.count != 1)) {
    return make_unexpected(malformed(who, "count " + std::to_string(ack.count) + " with code " +
                                              std::to_string(static_cast<int>(ack.code))));
  }
  if (ack.count - 1 > UINT64_MAX - ack.sequence) {
    return make_unexpected(malformed(who, "sequence " + std::to_string(ack.sequence) +
                                              " + count " + std::to_string(ack.count) +
                                              " passes the largest sequence number"));
  }
  return {};
}

}  // namespace

std::string encode(const Ack& ack) {
  const std::size_t text = ack.message.size() < kMaxAckTextBytes ? ack.message.size()
                                                                  : kMaxAckTextBytes;
  std::string out(kAckFixedBytes + text, '\0');
  auto* bytes = reinterpret_cast<std::uint8_t*>(out.data());
  detail::ByteWriter(bytes)
      .u32(kWireMagic)
      .u32(kWireVersion)
      .u32(static_cast<std::uint32_t>(out.size()))
      .u32(static_cast<std::uint32_t>(ack.code))
      .u64(ack.sequence)
      .u64(ack.count);
  out.replace(kAckFixedBytes, text, ack.message, 0, text);
  return out;
}

expected<Ack, Error> decode_ack(const std::uint8_t* bytes, std::size_t size) {
  constexpr const char* kWho = "ucx ack";
  auto version = check_preamble(kWho, bytes, size, kAckFixedBytes);
  if (!version) {
    return forward_error(std::move(version));
  }
  if (*version != kWireVersion) {
    return make_unexpected(malformed(kWho, "wire version " + std::to_string(*version) +
                                               ", this build reads " +
                                               std::to_string(kWireVersion)));
  }
  if (size - kAckFixedBytes > kMaxAckTextBytes) {
    return make_unexpected(malformed(kWho, "text of " + std::to_string(size - kAckFixedBytes) +
                                               " bytes is longer than " +
                                               std::to_string(kMaxAckTextBytes)));
  }
  detail::ByteReader r(bytes + 12);
  const std::uint32_t code = r.u32();
  if (code > kLastErrorCode) {
    return make_unexpected(malformed(kWho, "code " + std::to_string(code) + " is not an ErrorCode"));
  }
  Ack ack;
  ack.code = static_cast<ErrorCode>(code);
  ack.sequence = r.u64();
  ack.count = r.u64();
  if (auto run = check_run(kWho, ack); !run) {
    return forward_error(std::move(run));
  }
  ack.message.assign(reinterpret_cast<const char*>(bytes) + kAckFixedBytes, size - kAckFixedBytes);
  return ack;
}

std::array<std::uint8_t, kHelloBytes> encode(const Hello& hello) noexcept {
  std::array<std::uint8_t, kHelloBytes> out{};
  detail::ByteWriter(out.data())
      .u32(kWireMagic)
      .u32(hello.version)
      .u32(static_cast<std::uint32_t>(kHelloBytes))
      .u32(0);
  return out;
}

expected<Hello, Error> decode_hello(const std::uint8_t* bytes, std::size_t size) {
  constexpr const char* kWho = "ucx hello";
  auto version = check_preamble(kWho, bytes, size, kHelloBytes);
  if (!version) {
    return forward_error(std::move(version));
  }
  // Another version's Hello may be longer; it is read only far enough to say which it is.
  if (*version == kWireVersion &&
      (size != kHelloBytes || detail::ByteReader(bytes + 12).u32() != 0)) {
    return make_unexpected(malformed(kWho, "a Hello of this version is 16 bytes ending in zero"));
  }
  return Hello{*version};
}

}  // namespace holoscan::ucx
