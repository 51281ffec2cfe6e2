#include "ucx/malformed_cases.hpp"

#include <cstdint>

#include <dlpack/dlpack.h>

#include "holoscan/ucx/wire.hpp"
#include "ucx/series.hpp"

namespace holoscan::test {
namespace {

// Byte offsets of the version-3 tensor header (docs/ucx.md).
constexpr std::size_t kVersionAt = 4;
constexpr std::size_t kNdimAt = 12;
constexpr std::size_t kSequenceAt = 16;
constexpr std::size_t kPayloadAt = 24;
constexpr std::size_t kFlagsAt = 32;
constexpr std::size_t kCodeAt = 40;
constexpr std::size_t kBitsAt = 41;
constexpr std::size_t kMajorAt = 44;
constexpr std::size_t kReservedAt = 52;
constexpr std::size_t kAnsweredAt = 56;
constexpr std::size_t kShapeAt = 72;

void patch(std::vector<std::uint8_t>& bytes, std::size_t at, std::uint64_t value, int width) {
  for (int i = 0; i < width; ++i) {
    bytes[at + i] = static_cast<std::uint8_t>(value >> (8 * i));
  }
}

// A valid message carrying tensor `k` of the series as sequence `sequence`.
WireCase valid(std::uint64_t sequence, std::uint64_t k) {
  const auto layout = ucx_series::layout(k);
  ucx::TensorHeader h;
  h.sequence = sequence;
  h.dtype = layout.dtype;
  h.dlpack_version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
  h.ndim = static_cast<std::int32_t>(layout.shape.size());
  std::int64_t count = 1;
  for (std::int32_t i = h.ndim; i-- > 0;) {
    h.shape[i] = layout.shape[i];
    h.strides[i] = count;
    count *= layout.shape[i];
  }
  h.payload_bytes = static_cast<std::uint64_t>(count * layout.dtype.bits / 8);
  WireCase c;
  c.name = "valid tensor " + std::to_string(k);
  c.sequence = sequence;
  c.header.resize(ucx::encoded_size(h));
  (void)ucx::encode(h, c.header.data(), c.header.size());
  c.data.resize(h.payload_bytes);
  ucx_series::fill(k, c.data.data(), c.data.size());
  c.series_index = k;
  c.acked_as = sequence;
  return c;
}

WireCase refused(std::uint64_t sequence, std::uint64_t k, std::string name, ErrorCode code,
                 std::string says) {
  WireCase c = valid(sequence, k);
  c.name = std::move(name);
  c.code = code;
  c.says = std::move(says);
  return c;
}

}  // namespace

std::vector<WireCase> wire_cases() {
  std::vector<WireCase> cases;
  std::uint64_t seq = 1;
  auto add = [&](std::uint64_t k, std::string name, ErrorCode code, std::string says) -> WireCase& {
    cases.push_back(refused(seq++, k, std::move(name), code, std::move(says)));
    return cases.back();
  };
  {
    WireCase& c = add(0, "bad magic", ErrorCode::kProtocolError, "magic 0x");
    c.header[0] ^= 0xff;
    c.acked_as = 0;  // nothing of a header with another magic is read
  }
  patch(add(0, "another version", ErrorCode::kIncompatible, "wire version 9").header, kVersionAt,
        9, 4);
  add(0, "truncated", ErrorCode::kProtocolError, "shorter than the 72-byte").header.resize(30);
  patch(add(0, "ndim 33", ErrorCode::kInvalidArgument, "ndim 33 is outside").header, kNdimAt, 33,
        4);
  patch(add(0, "negative extent", ErrorCode::kInvalidArgument, "shape[0] is -1").header, kShapeAt,
        static_cast<std::uint64_t>(-1), 8);
  patch(add(0, "unknown dtype", ErrorCode::kInvalidArgument, "dtype.code 99").header, kCodeAt, 99,
        1);
  patch(add(0, "zero bits", ErrorCode::kInvalidArgument, "dtype.bits is 0").header, kBitsAt, 0, 1);
  patch(add(0, "unknown flags", ErrorCode::kInvalidArgument, "dlpack_flags has unknown bits")
            .header,
        kFlagsAt, std::uint64_t{1} << 40, 8);
  patch(add(1, "strided", ErrorCode::kInvalidArgument, "strides[0] is 36").header,
        kShapeAt + 3 * 8, 36, 8);
  {
    WireCase& c = add(0, "payload_bytes against the layout", ErrorCode::kInvalidArgument,
                      "payload_bytes 999 does not match");
    patch(c.header, kPayloadAt, 999, 8);
    c.data.resize(999);
  }
  add(0, "short data", ErrorCode::kProtocolError, "data of 60 bytes").data.resize(60);
  patch(add(0, "DLPack major 2", ErrorCode::kInvalidArgument, "dlpack_version.major 2").header,
        kMajorAt, 2, 4);
  patch(add(0, "reserved bits", ErrorCode::kProtocolError, "reserved field").header, kReservedAt,
        1, 4);
  patch(add(0, "answered sequence without a count", ErrorCode::kProtocolError,
            "answered run (sequence 5, count 0)")
            .header,
        kAnsweredAt, 5, 8);
  {
    WireCase& c = add(0, "answered run past the last sequence number", ErrorCode::kProtocolError,
                      "is not a run of sequence numbers");
    patch(c.header, kAnsweredAt, UINT64_MAX, 8);
    patch(c.header, kAnsweredAt + 8, 2, 8);
  }
  // Known to DLPack >= 1.1 headers, unknown to a 1.0 build.
  const bool padded_known = DLPACK_MINOR_VERSION >= 1;
  patch(add(0, "padded sub-byte",
            padded_known ? ErrorCode::kNotImplemented : ErrorCode::kInvalidArgument,
            padded_known ? "padded sub-byte" : "unknown bits 0x4")
            .header,
        kFlagsAt, 4, 8);
  {
    WireCase& c = add(0, "sequence 0", ErrorCode::kProtocolError, "sequence 0 is no sequence");
    patch(c.header, kSequenceAt, 0, 8);
    c.sequence = 0;
    c.acked_as = 0;  // answered, as a header too broken to name its tensor
  }
  add(0, "no reply endpoint", ErrorCode::kProtocolError, "without a known reply endpoint").reply =
      false;
  cases.push_back(valid(seq++, 0));
  cases.push_back(valid(seq++, 2));
  return cases;
}

WireCase refused_with_answer(std::uint64_t sequence, ucx::AnsweredRun run) {
  WireCase c = refused(sequence, 0, "unknown dtype, answering", ErrorCode::kInvalidArgument,
                       "dtype.code 99");
  (void)ucx::write_answered(c.header.data(), c.header.size(), run);
  patch(c.header, kCodeAt, 99, 1);
  return c;
}

std::vector<WireCase> burst_cases(std::uint64_t count, std::uint64_t refused_sequence) {
  std::vector<WireCase> cases;
  for (std::uint64_t seq = 1; seq <= count; ++seq) {
    if (seq != refused_sequence) {
      cases.push_back(valid(seq, 0));
      continue;
    }
    cases.push_back(refused(seq, 0, "reserved bits", ErrorCode::kProtocolError, "reserved field"));
    patch(cases.back().header, kReservedAt, 1, 4);
  }
  return cases;
}

}  // namespace holoscan::test
