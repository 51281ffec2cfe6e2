// The wire format alone: round trips, and every refusal of a malformed header with its code and
// the field it names (the same cases the raw peer sends over a connection).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "holoscan/dlpack.hpp"
#include "holoscan/ucx/wire.hpp"
#include "ucx/malformed_cases.hpp"

namespace holoscan::test {
namespace {

ucx::TensorHeader sample() {
  ucx::TensorHeader h;
  h.sequence = 7;
  h.dtype = DLDataType{kDLFloat, 32, 1};
  h.dlpack_version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
  h.ndim = 2;
  h.shape[0] = 3;
  h.shape[1] = 4;
  h.strides[0] = 4;
  h.strides[1] = 1;
  h.payload_bytes = 48;
  return h;
}

TEST(UcxWire, TensorHeaderRoundTrips) {
  const ucx::TensorHeader h = sample();
  std::vector<std::uint8_t> bytes(ucx::encoded_size(h));
  auto size = ucx::encode(h, bytes.data(), bytes.size());
  ASSERT_TRUE(size);
  EXPECT_EQ(*size, ucx::kTensorHeaderFixedBytes + 32);
  auto decoded = ucx::decode_tensor_header(bytes.data(), bytes.size());
  ASSERT_TRUE(decoded) << to_string(decoded.error());
  EXPECT_EQ(decoded->sequence, 7u);
  EXPECT_EQ(decoded->ndim, 2);
  EXPECT_EQ(decoded->shape[1], 4);
  EXPECT_EQ(decoded->payload_bytes, 48u);
  EXPECT_EQ(ucx::peek_sequence(bytes.data(), bytes.size()), 7u);
}

// A confirmation that became due after the header was made is written into it in place, and read
// back from a header whose tensor fields are refused (the sends it answers still end).
TEST(UcxWire, TensorHeaderCarriesARunOfAnswers) {
  ucx::TensorHeader h = sample();
  std::vector<std::uint8_t> bytes(ucx::encoded_size(h));
  ASSERT_TRUE(ucx::encode(h, bytes.data(), bytes.size()));
  EXPECT_EQ(ucx::peek_answered(bytes.data(), bytes.size()).count, 0u) << "none by default";
  ASSERT_TRUE(ucx::write_answered(bytes.data(), bytes.size(), ucx::AnsweredRun{11, 3}));
  auto decoded = ucx::decode_tensor_header(bytes.data(), bytes.size());
  ASSERT_TRUE(decoded) << to_string(decoded.error());
  EXPECT_EQ(decoded->answered_sequence, 11u);
  EXPECT_EQ(decoded->answered_count, 3u);
  EXPECT_EQ(decoded->sequence, 7u);
  EXPECT_FALSE(ucx::write_answered(bytes.data(), bytes.size(), ucx::AnsweredRun{5, 0}))
      << "a sequence without a count";
  EXPECT_FALSE(ucx::write_answered(bytes.data(), bytes.size(), ucx::AnsweredRun{0, 2}))
      << "sequence numbers start at 1";
  EXPECT_FALSE(ucx::write_answered(bytes.data(), bytes.size(), ucx::AnsweredRun{UINT64_MAX, 2}));
  EXPECT_FALSE(ucx::write_answered(bytes.data(), bytes.size() - 1, ucx::AnsweredRun{1, 1}))
      << "not an encoded header";
  std::vector<std::uint8_t> unknown_dtype = bytes;
  unknown_dtype[40] = 99;  // dtype.code: the tensor is refused, its answers are not
  ASSERT_FALSE(ucx::decode_tensor_header(unknown_dtype.data(), unknown_dtype.size()));
  const ucx::AnsweredRun run = ucx::peek_answered(unknown_dtype.data(), unknown_dtype.size());
  EXPECT_EQ(run.sequence, 11u);
  EXPECT_EQ(run.count, 3u);
  std::vector<std::uint8_t> other_version = bytes;
  other_version[4] = 2;
  EXPECT_EQ(ucx::peek_answered(other_version.data(), other_version.size()).count, 0u)
      << "another version's bytes are not read";
  std::vector<std::uint8_t> wrapping = bytes;  // UINT64_MAX, 0, 1: would end send 1 if read
  std::fill(wrapping.begin() + 56, wrapping.begin() + 64, 0xff);
  wrapping[64] = 3;
  std::fill(wrapping.begin() + 65, wrapping.begin() + 72, 0);
  EXPECT_FALSE(ucx::decode_tensor_header(wrapping.data(), wrapping.size()));
  EXPECT_EQ(ucx::peek_answered(wrapping.data(), wrapping.size()).count, 0u)
      << "a run past the last sequence number is not applied";
  h.answered_sequence = 4;
  auto refused = ucx::encode(h, bytes.data(), bytes.size());
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kProtocolError);
  EXPECT_NE(refused.error().message.find("answered run (sequence 4, count 0)"), std::string::npos);
}

TEST(UcxWire, EncodeRefusesWhatDecodeWouldRefuse) {
  ucx::TensorHeader h = sample();
  h.strides[0] = 5;
  std::vector<std::uint8_t> bytes(ucx::kMaxTensorHeaderBytes);
  auto refused = ucx::encode(h, bytes.data(), bytes.size());
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(refused.error().message.find("strides[0] is 5"), std::string::npos);
  h = sample();
  auto cramped = ucx::encode(h, bytes.data(), 10);
  ASSERT_FALSE(cramped);
  EXPECT_EQ(cramped.error().code, ErrorCode::kInvalidArgument);
}

// docs/ucx.md: a header is refused exactly where an import of the same fields would be. Strides of
// dimensions of extent 1 (or of an empty tensor) address nothing, and the wire took any; an import
// still refuses one that cannot be written in bytes.
// A DLPack import takes up to 64 dimensions, the header's arrays 32: validate() and encode() once
// read (and check_strides wrote) ndim entries of 32-entry arrays, and encode() wrote
// 72 + 16 * ndim bytes after checking room for 32.
TEST(UcxWire, MoreDimensionsThanTheWireHoldsAreRefusedBeforeAnyIsRead) {
  for (const std::int32_t ndim : {33, 64, -1}) {
    ucx::TensorHeader h = sample();
    h.ndim = ndim;
    auto valid = ucx::validate(h);
    ASSERT_FALSE(valid) << ndim;
    EXPECT_EQ(valid.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(valid.error().message.find("ndim " + std::to_string(ndim) + " is outside [0, 32]"),
              std::string::npos)
        << valid.error().message;
    std::vector<std::uint8_t> bytes(ucx::kMaxTensorHeaderBytes + 256, 0xAB);
    auto size = ucx::encode(h, bytes.data(), ucx::kMaxTensorHeaderBytes);
    ASSERT_FALSE(size) << ndim;
    EXPECT_EQ(size.error().code, ErrorCode::kInvalidArgument);
    EXPECT_TRUE(std::all_of(bytes.begin(), bytes.end(), [](std::uint8_t b) { return b == 0xAB; }))
        << "a refused encode writes nothing";
  }
}

TEST(UcxWire, AStrideAnImportRefusesIsRefusedInAHeaderToo) {
  ucx::TensorHeader h = sample();
  h.shape[0] = 1;
  h.strides[0] = INT64_MAX;
  h.payload_bytes = 16;
  DLManagedTensorVersioned managed{};
  managed.version = h.dlpack_version;
  managed.dl_tensor.ndim = h.ndim;
  managed.dl_tensor.shape = h.shape.data();
  managed.dl_tensor.strides = h.strides.data();
  managed.dl_tensor.dtype = h.dtype;
  managed.dl_tensor.device = DLDevice{kDLCPU, 0};
  float data[4] = {};
  managed.dl_tensor.data = data;
  auto imported = make_tensor_from_dlpack_versioned(&managed);
  ASSERT_FALSE(imported) << "the import's verdict is the reference";
  std::vector<std::uint8_t> bytes(ucx::kMaxTensorHeaderBytes);
  auto encoded = ucx::encode(h, bytes.data(), bytes.size());
  ASSERT_FALSE(encoded) << "the header was accepted";
  EXPECT_EQ(encoded.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(encoded.error().message.find("strides[0] is 9223372036854775807, too large to "
                                         "express in bytes"),
            std::string::npos)
      << encoded.error().message;
  h.strides[0] = 123;  // any stride an import takes for an extent of 1 travels as it did
  EXPECT_TRUE(ucx::encode(h, bytes.data(), bytes.size()));
}

TEST(UcxWire, EveryMalformedHeaderIsRefusedNamingTheField) {
  for (const WireCase& c : wire_cases()) {
    if (c.code == ErrorCode::kSuccess || !c.reply || c.name == "short data") {
      continue;  // delivered, or refused for what surrounds the header
    }
    SCOPED_TRACE(c.name);
    auto decoded = ucx::decode_tensor_header(c.header.data(), c.header.size());
    ASSERT_FALSE(decoded);
    EXPECT_EQ(decoded.error().code, c.code);
    EXPECT_NE(decoded.error().message.find(c.says), std::string::npos) << decoded.error().message;
    EXPECT_EQ(ucx::peek_sequence(c.header.data(), c.header.size()), c.acked_as);
  }
}

TEST(UcxWire, AckRoundTripsAndRefusesNonsense) {
  const std::string bytes = ucx::encode(ucx::Ack{9, ErrorCode::kInvalidArgument, "shape[0]"});
  const auto* raw = reinterpret_cast<const std::uint8_t*>(bytes.data());
  auto ack = ucx::decode_ack(raw, bytes.size());
  ASSERT_TRUE(ack);
  EXPECT_EQ(ack->sequence, 9u);
  EXPECT_EQ(ack->code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(ack->message, "shape[0]");
  std::string bad_code = bytes;
  bad_code[12] = 100;
  auto refused = ucx::decode_ack(reinterpret_cast<const std::uint8_t*>(bad_code.data()),
                                 bad_code.size());
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kProtocolError);
  EXPECT_NE(refused.error().message.find("code 100"), std::string::npos);
  EXPECT_FALSE(ucx::decode_ack(raw, bytes.size() - 1)) << "total_length must match";
  const std::string long_text(5000, 'x');
  EXPECT_EQ(ucx::encode(ucx::Ack{1, ErrorCode::kFailure, long_text}).size(),
            ucx::kAckFixedBytes + ucx::kMaxAckTextBytes);
}

TEST(UcxWire, AckNamesARunOfDeliveriesOrOneRefusal) {
  const std::string run = ucx::encode(ucx::Ack{5, ErrorCode::kSuccess, {}, 12});
  ASSERT_EQ(run.size(), ucx::kAckFixedBytes);
  auto decoded = ucx::decode_ack(reinterpret_cast<const std::uint8_t*>(run.data()), run.size());
  ASSERT_TRUE(decoded) << to_string(decoded.error());
  EXPECT_EQ(decoded->sequence, 5u);
  EXPECT_EQ(decoded->count, 12u);
  const auto refused_with = [](const ucx::Ack& ack, const std::string& says) {
    const std::string bytes = ucx::encode(ack);
    auto refused = ucx::decode_ack(reinterpret_cast<const std::uint8_t*>(bytes.data()),
                                   bytes.size());
    ASSERT_FALSE(refused) << says;
    EXPECT_EQ(refused.error().code, ErrorCode::kProtocolError);
    EXPECT_NE(refused.error().message.find(says), std::string::npos) << refused.error().message;
  };
  refused_with(ucx::Ack{5, ErrorCode::kSuccess, {}, 0}, "count 0");
  refused_with(ucx::Ack{5, ErrorCode::kInvalidArgument, "no", 2}, "count 2 with code");
  refused_with(ucx::Ack{UINT64_MAX - 1, ErrorCode::kSuccess, {}, 3},
               "passes the largest sequence number");
  auto last = ucx::encode(ucx::Ack{UINT64_MAX - 1, ErrorCode::kSuccess, {}, 2});
  EXPECT_TRUE(ucx::decode_ack(reinterpret_cast<const std::uint8_t*>(last.data()), last.size()))
      << "a run may end at the largest sequence number";
  std::string version_one = run;
  version_one[4] = 1;
  auto old = ucx::decode_ack(reinterpret_cast<const std::uint8_t*>(version_one.data()),
                             version_one.size());
  ASSERT_FALSE(old);
  EXPECT_NE(old.error().message.find("wire version 1"), std::string::npos);
}

TEST(UcxWire, HelloCarriesTheVersion) {
  auto bytes = ucx::encode(ucx::Hello{42});
  auto hello = ucx::decode_hello(bytes.data(), bytes.size());
  ASSERT_TRUE(hello);
  EXPECT_EQ(hello->version, 42u);
  auto current = ucx::encode(ucx::Hello{});
  current[12] = 1;
  auto refused = ucx::decode_hello(current.data(), current.size());
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kProtocolError);
  bytes[0] ^= 1;
  EXPECT_FALSE(ucx::decode_hello(bytes.data(), bytes.size()));
}

}  // namespace
}  // namespace holoscan::test
