// The tensor message's header: a fixed little-endian part (version 3 added the run of the
// receiver's own tensors it confirms), then ndim extents and ndim strides. The layout rules are the DLPack import's own (dlpack_validate.hpp), so that a header
// is refused exactly where an import of the same fields would be.
#include <cstdio>
#include <string>

#include "byte_cursor.hpp"
#include "dlpack/dlpack_validate.hpp"  // the core's layout rules (internal)
#include "holoscan/ucx/wire.hpp"

namespace holoscan::ucx {
namespace {

constexpr const char* kWho = "ucx tensor header";

Error refusal(ErrorCode code, const std::string& what) {
  return Error{code, std::string(kWho) + ": " + what, 0};
}

std::string hex(std::uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof(text), "%#llx", static_cast<unsigned long long>(value));
  return text;
}

std::size_t size_for(std::size_t ndim) noexcept {
  return kTensorHeaderFixedBytes + 2 * sizeof(std::int64_t) * ndim;
}

// Where the confirmed run sits in the fixed part (docs/ucx.md).
constexpr std::size_t kAnsweredAt = 56;

// None (0, 0), or a run of at least one whose last sequence number is representable; sequence
// numbers start at 1.
bool sound(AnsweredRun run) noexcept {
  if (run.count == 0) {
    return run.sequence == 0;
  }
  return run.sequence != 0 && run.count - 1 <= UINT64_MAX - run.sequence;
}

// Magic, version and a total length that matches both `size` and the ndim field: the framing
// of an encoded header of this version, whatever its fields.
bool framed(const std::uint8_t* bytes, std::size_t size) noexcept {
  if (bytes == nullptr || size < kTensorHeaderFixedBytes) {
    return false;
  }
  detail::ByteReader r(bytes);
  const std::uint32_t magic = r.u32();
  const std::uint32_t version = r.u32();
  const std::uint32_t total = r.u32();
  const std::uint32_t ndim = r.u32();
  return magic == kWireMagic && version == kWireVersion && total == size && ndim <= kMaxWireDims &&
         size == size_for(ndim);
}

expected<void, Error> check_flags_and_version(const TensorHeader& h) {
  if (h.dlpack_version.major != DLPACK_MAJOR_VERSION) {
    return make_unexpected(refusal(ErrorCode::kInvalidArgument,
                                   "dlpack_version.major " + std::to_string(h.dlpack_version.major) +
                                       " is not " + std::to_string(DLPACK_MAJOR_VERSION)));
  }
  if (const std::uint64_t unknown = h.dlpack_flags & ~holoscan::detail::known_flag_bits();
      unknown != 0) {
    return make_unexpected(
        refusal(ErrorCode::kInvalidArgument, "dlpack_flags has unknown bits " + hex(unknown)));
  }
  if ((h.dlpack_flags & holoscan::detail::kSubBytePaddedFlag) != 0) {
    return make_unexpected(refusal(ErrorCode::kNotImplemented,
                                   "dlpack_flags: padded sub-byte tensors "
                                   "(IS_SUBBYTE_TYPE_PADDED) do not travel yet"));
  }
  return {};
}

// The payload is the compact row-major layout: a dimension longer than 1 must have its compact
// stride (shorter ones are never stepped over, so any stride addresses the same bytes).
expected<void, Error> check_strides(const TensorHeader& h, std::int64_t size) {
  if (size == 0) {
    return {};  // no element is addressed
  }
  std::array<std::int64_t, kMaxWireDims> compact{};
  holoscan::detail::compact_strides(h.ndim, h.shape.data(), compact.data());
  for (std::int32_t i = 0; i < h.ndim; ++i) {
    if (h.shape[i] > 1 && h.strides[i] != compact[i]) {
      return make_unexpected(refusal(
          ErrorCode::kInvalidArgument,
          "strides[" + std::to_string(i) + "] is " + std::to_string(h.strides[i]) +
              ", not the compact row-major stride " + std::to_string(compact[i]) +
              " (only contiguous tensors travel)"));
    }
  }
  return {};
}

}  // namespace

std::size_t encoded_size(const TensorHeader& header) noexcept {
  const auto ndim = static_cast<std::size_t>(header.ndim);
  return size_for(header.ndim < 0 ? 0 : (ndim > kMaxWireDims ? kMaxWireDims : ndim));
}

expected<void, Error> validate(const TensorHeader& h) {
  // First: an import allows more dimensions than the header's arrays hold, and every check
  // below reads ndim entries of them.
  if (h.ndim < 0 || static_cast<std::size_t>(h.ndim) > kMaxWireDims) {
    return make_unexpected(
        refusal(ErrorCode::kInvalidArgument, "ndim " + std::to_string(h.ndim) + " is outside [0, " +
                                                 std::to_string(kMaxWireDims) + "]"));
  }
  if (h.sequence == 0) {  // an Ack naming 0 would confirm nothing the sender can find
    return make_unexpected(
        refusal(ErrorCode::kProtocolError, "sequence 0 is no sequence number (they start at 1)"));
  }
  if (!sound(AnsweredRun{h.answered_sequence, h.answered_count})) {
    return make_unexpected(refusal(ErrorCode::kProtocolError,
                                   "answered run (sequence " + std::to_string(h.answered_sequence) +
                                       ", count " + std::to_string(h.answered_count) +
                                       ") is not a run of sequence numbers"));
  }
  if (auto checked = check_flags_and_version(h); !checked) {
    return checked;
  }
  // The strides as an import checks them (each in bytes, the span), then as the wire needs them.
  auto layout = holoscan::detail::validate_layout(h.ndim, h.shape.data(), h.dtype, h.dlpack_flags,
                                                  kWho, h.strides.data());
  if (!layout) {
    return forward_error(std::move(layout));
  }
  if (auto strides = check_strides(h, layout->size); !strides) {
    return strides;
  }
  if (h.payload_bytes != static_cast<std::uint64_t>(layout->nbytes)) {
    return make_unexpected(refusal(ErrorCode::kInvalidArgument,
                                   "payload_bytes " + std::to_string(h.payload_bytes) +
                                       " does not match shape and dtype (" +
                                       std::to_string(layout->nbytes) + " bytes)"));
  }
  return {};
}

expected<std::size_t, Error> encode(const TensorHeader& h, std::uint8_t* out,
                                    std::size_t capacity) {
  if (auto valid = validate(h); !valid) {
    return forward_error(std::move(valid));
  }
  const std::size_t size = encoded_size(h);
  if (out == nullptr || capacity < size) {
    return make_unexpected(refusal(ErrorCode::kInvalidArgument,
                                   "room for " + std::to_string(capacity) + " bytes, " +
                                       std::to_string(size) + " needed"));
  }
  detail::ByteWriter w(out);
  w.u32(kWireMagic).u32(kWireVersion).u32(static_cast<std::uint32_t>(size));
  w.u32(static_cast<std::uint32_t>(h.ndim)).u64(h.sequence).u64(h.payload_bytes);
  w.u64(h.dlpack_flags).u8(h.dtype.code).u8(h.dtype.bits).u16(h.dtype.lanes);
  w.u32(h.dlpack_version.major).u32(h.dlpack_version.minor).u32(0);
  w.u64(h.answered_sequence).u64(h.answered_count);
  for (std::int32_t i = 0; i < h.ndim; ++i) {
    w.i64(h.shape[i]);
  }
  for (std::int32_t i = 0; i < h.ndim; ++i) {
    w.i64(h.strides[i]);
  }
  return size;
}

expected<TensorHeader, Error> decode_tensor_header(const std::uint8_t* bytes, std::size_t size) {
  if (bytes == nullptr || size < kTensorHeaderFixedBytes) {
    return make_unexpected(refusal(ErrorCode::kProtocolError,
                                   std::to_string(size) + " bytes, shorter than the " +
                                       std::to_string(kTensorHeaderFixedBytes) + "-byte fixed part"));
  }
  detail::ByteReader r(bytes);
  if (const std::uint32_t magic = r.u32(); magic != kWireMagic) {
    return make_unexpected(refusal(ErrorCode::kProtocolError, "magic " + hex(magic) +
                                                                  " is not \"HDLU\" (" +
                                                                  hex(kWireMagic) + ")"));
  }
  if (const std::uint32_t version = r.u32(); version != kWireVersion) {
    return make_unexpected(refusal(ErrorCode::kIncompatible,
                                   "wire version " + std::to_string(version) +
                                       ", this build reads " + std::to_string(kWireVersion)));
  }
  if (const std::uint32_t total = r.u32(); total != size) {
    return make_unexpected(refusal(ErrorCode::kProtocolError,
                                   "total_length " + std::to_string(total) + " does not match the " +
                                       std::to_string(size) + " bytes received"));
  }
  const std::uint32_t ndim = r.u32();
  if (ndim > kMaxWireDims) {
    return make_unexpected(refusal(ErrorCode::kInvalidArgument,
                                   "ndim " + std::to_string(ndim) + " is outside [0, " +
                                       std::to_string(kMaxWireDims) + "]"));
  }
  if (size != size_for(ndim)) {
    return make_unexpected(refusal(ErrorCode::kProtocolError,
                                   "total_length " + std::to_string(size) + " does not match ndim " +
                                       std::to_string(ndim) + " (" +
                                       std::to_string(size_for(ndim)) + " bytes)"));
  }
  TensorHeader h;
  h.ndim = static_cast<std::int32_t>(ndim);
  h.sequence = r.u64();
  h.payload_bytes = r.u64();
  h.dlpack_flags = r.u64();
  h.dtype.code = r.u8();
  h.dtype.bits = r.u8();
  h.dtype.lanes = r.u16();
  h.dlpack_version.major = r.u32();
  h.dlpack_version.minor = r.u32();
  if (const std::uint32_t reserved = r.u32(); reserved != 0) {
    return make_unexpected(
        refusal(ErrorCode::kProtocolError, "reserved field is " + hex(reserved) + ", not zero"));
  }
  h.answered_sequence = r.u64();
  h.answered_count = r.u64();
  for (std::uint32_t i = 0; i < ndim; ++i) {
    h.shape[i] = r.i64();
  }
  for (std::uint32_t i = 0; i < ndim; ++i) {
    h.strides[i] = r.i64();
  }
  if (auto valid = validate(h); !valid) {
    return forward_error(std::move(valid));
  }
  return h;
}

AnsweredRun peek_answered(const std::uint8_t* bytes, std::size_t size) noexcept {
  if (!framed(bytes, size)) {
    return {};
  }
  detail::ByteReader r(bytes + kAnsweredAt);
  AnsweredRun run;
  run.sequence = r.u64();
  run.count = r.u64();
  return sound(run) ? run : AnsweredRun{};
}

bool write_answered(std::uint8_t* bytes, std::size_t size, AnsweredRun run) noexcept {
  if (!framed(bytes, size) || !sound(run)) {
    return false;
  }
  detail::ByteWriter(bytes + kAnsweredAt).u64(run.sequence).u64(run.count);
  return true;
}

std::uint64_t peek_sequence(const std::uint8_t* bytes, std::size_t size) noexcept {
  constexpr std::size_t kSequenceEnd = 24;
  if (bytes == nullptr || size < kSequenceEnd) {
    return 0;
  }
  detail::ByteReader r(bytes);
  if (r.u32() != kWireMagic) {
    return 0;
  }
  r.skip(12);  // version, total length, ndim
  return r.u64();
}

}  // namespace holoscan::ucx
