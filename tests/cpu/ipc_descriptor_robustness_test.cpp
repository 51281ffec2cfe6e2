// Covers decode() on damaged bytes: every truncation is refused, and every single-bit flip is
// either refused or decodes to a valid descriptor that re-encodes to exactly the flipped bytes
// (the encoding is canonical). Run under ASan/UBSan this also shows no read past the input.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "holoscan/ipc/descriptor.hpp"
#include "support/gtest_printers.hpp"
#include "support/ipc_samples.hpp"

namespace holoscan::ipc {
namespace {

using Bytes = std::vector<std::uint8_t>;

std::vector<TensorDescriptor> samples() {
  std::vector<TensorDescriptor> all;
  all.push_back(test::sample_descriptor());
  TensorDescriptor scalar = test::sample_descriptor();
  scalar.shape = {};
  scalar.strides = {};
  scalar.has_readiness_event = false;
  scalar.readiness_event = {};
  all.push_back(scalar);
  TensorDescriptor packed = test::sample_descriptor();
  packed.handle_kind = MemoryHandleKind::kPosixFd;
  packed.dtype = DLDataType{17, 4, 1};
  packed.shape = {3, 5};
  packed.strides = {-5, 1};
  packed.offset = 20;
  packed.allocation_bytes = 64;
  all.push_back(packed);
  return all;
}

// The input copied to a buffer of exactly `size` bytes, so that ASan sees any read past it.
expected<TensorDescriptor, Error> decode_exact(const Bytes& bytes, std::size_t size) {
  std::unique_ptr<std::uint8_t[]> copy(new std::uint8_t[size == 0 ? 1 : size]);
  std::copy(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(size), copy.get());
  return decode(size == 0 ? nullptr : copy.get(), size);
}

TEST(IpcDescriptorRobustness, EveryTruncationIsRefused) {
  for (const TensorDescriptor& sample : samples()) {
    const Bytes bytes = test::encoded(sample);
    for (std::size_t size = 0; size < bytes.size(); ++size) {
      auto d = decode_exact(bytes, size);
      ASSERT_FALSE(d.has_value()) << "decoded a " << size << "-byte prefix";
      EXPECT_EQ(d.error().code, ErrorCode::kInvalidArgument);
      const std::string expected =
          size < 12 ? std::to_string(size) + " bytes, too few for magic, version and " +
                          "total_length (12)"
                    : "total_length " + std::to_string(bytes.size()) + " does not match the " +
                          std::to_string(size) + " bytes given";
      EXPECT_EQ(d.error().message, "ipc descriptor: " + expected);
    }
  }
}

TEST(IpcDescriptorRobustness, EveryBitFlipIsRefusedOrCanonical) {
  std::size_t refused = 0;
  std::size_t accepted = 0;
  for (const TensorDescriptor& sample : samples()) {
    const Bytes bytes = test::encoded(sample);
    for (std::size_t at = 0; at < bytes.size(); ++at) {
      for (int bit = 0; bit < 8; ++bit) {
        Bytes flipped = bytes;
        flipped[at] ^= static_cast<std::uint8_t>(1u << bit);
        auto d = decode_exact(flipped, flipped.size());
        if (!d) {
          EXPECT_EQ(d.error().code, ErrorCode::kInvalidArgument);
          EXPECT_EQ(d.error().message.rfind("ipc descriptor: ", 0), 0u) << d.error().message;
          ++refused;
          continue;
        }
        ++accepted;
        auto again = encode(*d);
        ASSERT_TRUE(again.has_value()) << again.error().message;
        EXPECT_EQ(*again, flipped) << "byte " << at << " bit " << bit;
      }
    }
  }
  // Both outcomes occur: opaque handles take any bits, framing fields take none.
  EXPECT_GT(refused, 0u);
  EXPECT_GT(accepted, 0u);
}

}  // namespace
}  // namespace holoscan::ipc
