// Covers the descriptor wire format: round trips of every shape of descriptor, and the exact
// refusal of each mangled field. The byte offsets below pin the version-1 layout: a change to
// them is a new format version.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "holoscan/ipc/descriptor.hpp"
#include "support/gtest_printers.hpp"
#include "support/ipc_samples.hpp"

namespace holoscan::ipc {
namespace {

using test::encoded;
using test::sample_descriptor;
using Bytes = std::vector<std::uint8_t>;

// Version-1 field offsets.
constexpr std::size_t kVersionAt = 4;
constexpr std::size_t kTotalLengthAt = 8;
constexpr std::size_t kHandleKindAt = 12;
constexpr std::size_t kAllocationBytesAt = 96;
constexpr std::size_t kOffsetAt = 104;
constexpr std::size_t kDtypeCodeAt = 128;
constexpr std::size_t kDtypeBitsAt = 129;
constexpr std::size_t kDtypeLanesAt = 130;
constexpr std::size_t kNdimAt = 132;
constexpr std::size_t kFlagsAt = 136;
constexpr std::size_t kExporterPidAt = 144;
constexpr std::size_t kHasEventAt = 148;
constexpr std::size_t kReservedAt = 149;
constexpr std::size_t kReadinessEventAt = 152;
constexpr std::size_t kDimsAt = 216;

void put(Bytes& bytes, std::size_t at, std::uint64_t value, std::size_t size) {
  for (std::size_t i = 0; i < size; ++i) {
    bytes[at + i] = static_cast<std::uint8_t>(value >> (8 * i));
  }
}

TensorDescriptor round_trip(const TensorDescriptor& d) {
  const Bytes bytes = encoded(d);
  auto back = decode(bytes.data(), bytes.size());
  EXPECT_TRUE(back.has_value()) << back.error().message;
  return back ? *back : TensorDescriptor{};
}

TEST(IpcDescriptor, SampleRoundTrips) {
  const TensorDescriptor d = sample_descriptor();
  const Bytes bytes = encoded(d);
  EXPECT_EQ(bytes.size(), kDescriptorHeaderBytes + 2 * 8 * 2);
  EXPECT_EQ(round_trip(d), d);
}

TEST(IpcDescriptor, ZeroDimensionalRoundTrips) {
  TensorDescriptor d = sample_descriptor();
  d.shape = {};
  d.strides = {};
  d.offset = 4092;  // its one element ends exactly at the end of the allocation
  EXPECT_EQ(encoded(d).size(), kDescriptorHeaderBytes);
  EXPECT_EQ(round_trip(d), d);
}

TEST(IpcDescriptor, ThirtyTwoDimensionsRoundTrip) {
  TensorDescriptor d = sample_descriptor();
  d.dtype = DLDataType{kDLUInt, 8, 1};
  d.shape.assign(kMaxDescriptorDims, 2);
  d.strides.resize(kMaxDescriptorDims);
  for (std::size_t i = 0; i < kMaxDescriptorDims; ++i) {
    d.strides[i] = std::int64_t{1} << (kMaxDescriptorDims - 1 - i);
  }
  d.offset = 0;
  d.allocation_bytes = std::uint64_t{1} << 32;
  EXPECT_EQ(encoded(d).size(), kMaxDescriptorBytes);
  EXPECT_EQ(round_trip(d), d);
}

TEST(IpcDescriptor, NegativeStridesRoundTrip) {
  TensorDescriptor d = sample_descriptor();
  d.shape = {3, 4};
  d.strides = {-4, -1};
  d.offset = 11 * 4;  // element 0 is the last one in memory; [0, 48) is addressed
  d.allocation_bytes = 48;
  EXPECT_EQ(round_trip(d), d);
  d.offset -= 1;
  EXPECT_FALSE(validate(d).has_value());
}

TEST(IpcDescriptor, EveryHandleKindRoundTrips) {
  for (const MemoryHandleKind kind :
       {MemoryHandleKind::kPosixFd, MemoryHandleKind::kCudaIpc, MemoryHandleKind::kFake}) {
    TensorDescriptor d = sample_descriptor();
    d.handle_kind = kind;
    EXPECT_EQ(round_trip(d), d);
  }
}

TEST(IpcDescriptor, WithoutReadinessEventRoundTrips) {
  TensorDescriptor d = sample_descriptor();
  d.has_readiness_event = false;
  d.readiness_event = {};
  EXPECT_EQ(round_trip(d), d);
}

TEST(IpcDescriptor, SubByteTypesRoundTripPackedAndPadded) {
  TensorDescriptor d = sample_descriptor();
  d.dtype = DLDataType{17, 4, 1};  // kDLFloat4_e2m1fn, by number: 1.0 headers lack the name
  d.shape = {5};
  d.strides = {1};
  d.offset = 0;
  d.allocation_bytes = 3;  // five packed 4-bit elements
  EXPECT_EQ(round_trip(d), d);
  d.dlpack_flags |= std::uint64_t{1} << 2;  // IS_SUBBYTE_TYPE_PADDED: a byte each
  EXPECT_FALSE(validate(d).has_value());
  d.allocation_bytes = 5;
  EXPECT_EQ(round_trip(d), d);
  d.dtype = DLDataType{15, 6, 1};  // kDLFloat6_e2m3fn
  EXPECT_EQ(round_trip(d), d);
}

TEST(IpcDescriptor, EmptyTensorNeedsNoSpan) {
  TensorDescriptor d = sample_descriptor();
  d.shape = {0, 8};
  // Addresses nothing, so any stride that has a size in bytes will do.
  d.strides = {INT64_MAX / 4, -(INT64_MAX / 4)};
  d.offset = 4096;
  EXPECT_EQ(round_trip(d), d);
}

// The layout rules are the DLPack import's: a stride must be expressible in bytes even where it
// addresses nothing (the importer's Tensor reports strides in bytes).
TEST(IpcDescriptor, EmptyTensorStridesStillFitInBytes) {
  TensorDescriptor d = sample_descriptor();
  d.shape = {0, 8};
  d.strides = {1, INT64_MIN};
  auto bytes = encode(d);
  ASSERT_FALSE(bytes.has_value());
  EXPECT_EQ(bytes.error().message,
            "ipc descriptor: strides[1] is -9223372036854775808, too large to express in bytes");
}

TEST(IpcDescriptor, EncodeRefusesInvalidDescriptors) {
  TensorDescriptor d = sample_descriptor();
  d.strides = {1};
  auto bytes = encode(d);
  ASSERT_FALSE(bytes.has_value());
  EXPECT_EQ(bytes.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(bytes.error().message, "ipc descriptor: strides has 1 entries, shape has 2");

  d = sample_descriptor();
  d.shape.assign(33, 1);
  d.strides.assign(33, 1);
  bytes = encode(d);
  ASSERT_FALSE(bytes.has_value());
  EXPECT_EQ(bytes.error().message, "ipc descriptor: ndim 33 is outside [0, 32]");
}

TEST(IpcDescriptor, NullOrTinyInputIsRefused) {
  auto d = decode(nullptr, 0);
  ASSERT_FALSE(d.has_value());
  EXPECT_EQ(d.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(d.error().message,
            "ipc descriptor: 0 bytes, too few for magic, version and total_length (12)");
}

// One mangled field: how to mangle the sample's bytes and the exact refusal.
struct Mangle {
  const char* name;
  std::function<void(Bytes&)> mangle;
  std::string message;
};

void PrintTo(const Mangle& m, std::ostream* os) { *os << m.name; }

class IpcDescriptorMangled : public ::testing::TestWithParam<Mangle> {};

TEST_P(IpcDescriptorMangled, IsRefusedNamingTheField) {
  Bytes bytes = encoded(sample_descriptor());
  GetParam().mangle(bytes);
  auto d = decode(bytes.data(), bytes.size());
  ASSERT_FALSE(d.has_value());
  EXPECT_EQ(d.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(d.error().message, "ipc descriptor: " + GetParam().message);
}

// The sample is 248 bytes: a 216-byte header and two dimensions.
const Mangle kMangles[] = {
    {"magic", [](Bytes& b) { b[0] ^= 0xff; }, "magic 0x544c44b7 is not \"HDLT\" (0x544c4448)"},
    {"version_2", [](Bytes& b) { put(b, kVersionAt, 2, 4); },
     "descriptor version 2, this build reads 1"},
    {"version_0", [](Bytes& b) { put(b, kVersionAt, 0, 4); },
     "descriptor version 0, this build reads 1"},
    {"total_length_long", [](Bytes& b) { put(b, kTotalLengthAt, 249, 4); },
     "total_length 249 does not match the 248 bytes given"},
    {"trailing_byte", [](Bytes& b) { b.push_back(0); },
     "total_length 248 does not match the 249 bytes given"},
    {"shorter_than_header",
     [](Bytes& b) {
       b.resize(100);
       put(b, kTotalLengthAt, 100, 4);
     },
     "total_length 100 is shorter than the 216-byte header"},
    {"ndim_33", [](Bytes& b) { put(b, kNdimAt, 33, 4); }, "ndim 33 is outside [0, 32]"},
    {"ndim_huge", [](Bytes& b) { put(b, kNdimAt, 0xffffffff, 4); },
     "ndim 4294967295 is outside [0, 32]"},
    {"ndim_3", [](Bytes& b) { put(b, kNdimAt, 3, 4); },
     "total_length 248 does not match ndim 3 (264 bytes)"},
    {"reserved", [](Bytes& b) { b[kReservedAt + 2] = 1; },
     "reserved bytes after has_readiness_event are not zero"},
    {"has_event_2", [](Bytes& b) { b[kHasEventAt] = 2; },
     "has_readiness_event is 2, must be 0 or 1"},
    {"handle_kind_0", [](Bytes& b) { put(b, kHandleKindAt, 0, 4); },
     "handle_kind 0 is not kPosixFd (1), kCudaIpc (2) or kFake (3)"},
    {"handle_kind_4", [](Bytes& b) { put(b, kHandleKindAt, 4, 4); },
     "handle_kind 4 is not kPosixFd (1), kCudaIpc (2) or kFake (3)"},
    {"allocation_bytes_0", [](Bytes& b) { put(b, kAllocationBytesAt, 0, 8); },
     "allocation_bytes 0 is outside [1, INT64_MAX]"},
    {"allocation_bytes_2_63", [](Bytes& b) { put(b, kAllocationBytesAt, 1ull << 63, 8); },
     "allocation_bytes 9223372036854775808 is outside [1, INT64_MAX]"},
    {"dtype_code", [](Bytes& b) { b[kDtypeCodeAt] = 18; },
     "dtype.code 18 is not a known DLDataTypeCode"},
    {"dtype_bits_0", [](Bytes& b) { b[kDtypeBitsAt] = 0; }, "dtype.bits is 0"},
    {"dtype_lanes_0", [](Bytes& b) { put(b, kDtypeLanesAt, 0, 2); }, "dtype.lanes is 0"},
    {"dtype_bits_12", [](Bytes& b) { b[kDtypeBitsAt] = 12; },
     "dtype.bits 12 is not a whole number of bytes"},
    {"dtype_float4_32_bits", [](Bytes& b) { b[kDtypeCodeAt] = 17; },
     "dtype.bits 32 (lanes 1) does not match dtype.code 17"},
    {"dtype_float6_lanes",
     [](Bytes& b) {
       b[kDtypeCodeAt] = 16;
       b[kDtypeBitsAt] = 6;
       put(b, kDtypeLanesAt, 2, 2);
     },
     "dtype.bits 6 (lanes 2) does not match dtype.code 16"},
    {"flags", [](Bytes& b) { put(b, kFlagsAt, 0x9, 8); },
     "dlpack_flags 0x9 has bits DLPack 1.3 does not define"},
    {"flags_high", [](Bytes& b) { put(b, kFlagsAt, 1ull << 63, 8); },
     "dlpack_flags 0x8000000000000000 has bits DLPack 1.3 does not define"},
    {"negative_extent", [](Bytes& b) { put(b, kDimsAt + 8, static_cast<std::uint64_t>(-1), 8); },
     "shape[1] is -1, must be >= 0"},
    {"element_count",
     [](Bytes& b) {
       put(b, kDimsAt, 1ull << 40, 8);
       put(b, kDimsAt + 8, 1ull << 40, 8);
     },
     "shape: element count overflows int64"},
    {"byte_size",
     [](Bytes& b) {
       put(b, kDimsAt, 1ull << 61, 8);
       put(b, kDimsAt + 8, 1, 8);
     },
     "shape: byte size overflows int64"},
    {"stride_bytes", [](Bytes& b) { put(b, kDimsAt + 16, INT64_MAX, 8); },
     "strides[0] is 9223372036854775807, too large to express in bytes"},
    {"stride_span", [](Bytes& b) { put(b, kDimsAt + 16, INT64_MAX / 4, 8); },
     "strides[0] with shape[0]: the addressed span overflows int64"},
    {"span_overflow",
     [](Bytes& b) {
       put(b, kDimsAt + 16, INT64_MAX / 16, 8);
       put(b, kDimsAt + 24, INT64_MAX / 64, 8);
     },
     "strides: addressed span overflows int64"},
    {"span_past_end", [](Bytes& b) { put(b, kOffsetAt, 3969, 8); },
     "offset 3969 with shape and strides addresses bytes outside the allocation's [0, 4096)"},
    {"span_before_start",
     [](Bytes& b) { put(b, kDimsAt + 16, static_cast<std::uint64_t>(-65), 8); },
     "offset 256 with shape and strides addresses bytes outside the allocation's [0, 4096)"},
    {"offset_huge", [](Bytes& b) { put(b, kOffsetAt, ~0ull, 8); },
     "offset 18446744073709551615 with shape and strides addresses bytes outside the "
     "allocation's [0, 4096)"},
    {"empty_offset_past_end",
     [](Bytes& b) {
       put(b, kDimsAt, 0, 8);
       put(b, kOffsetAt, 4097, 8);
     },
     "offset 4097 is past allocation_bytes 4096"},
    {"event_without_flag", [](Bytes& b) { b[kHasEventAt] = 0; },
     "readiness_event is not all zero while has_readiness_event is false"},
    {"pid_0", [](Bytes& b) { put(b, kExporterPidAt, 0, 4); }, "exporter_pid 0 is not a process id"},
    {"pid_negative", [](Bytes& b) { put(b, kExporterPidAt, 0x80000000u, 4); },
     "exporter_pid 2147483648 is not a process id"},
};

INSTANTIATE_TEST_SUITE_P(EveryField, IpcDescriptorMangled, ::testing::ValuesIn(kMangles),
                         [](const ::testing::TestParamInfo<Mangle>& param) {
                           return std::string(param.param.name);
                         });

TEST(IpcDescriptor, ReadinessEventBytesAreNotInterpreted) {
  Bytes bytes = encoded(sample_descriptor());
  bytes[kReadinessEventAt] ^= 0xff;
  auto d = decode(bytes.data(), bytes.size());
  ASSERT_TRUE(d.has_value()) << d.error().message;
  EXPECT_EQ(d->readiness_event[0], 0x10 ^ 0xff);
}

}  // namespace
}  // namespace holoscan::ipc
