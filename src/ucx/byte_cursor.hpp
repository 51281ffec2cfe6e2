#pragma once
// Sequential little-endian writing and reading of the UCX messages' fields. The caller checks the
// sizes first; the cursors only fix the byte order, so that the format is the same on every host.
#include <cstddef>
#include <cstdint>

namespace holoscan::ucx::detail {

/** @brief Writes fields one after the other, least significant byte first. */
class ByteWriter {
 public:
  explicit ByteWriter(std::uint8_t* out) noexcept : out_(out) {}

  /** @brief Writes the low `bytes` (at most 8) bytes of `value`. */
  ByteWriter& put(std::uint64_t value, std::size_t bytes) noexcept {
    for (std::size_t i = 0; i < bytes; ++i) {
      *out_++ = static_cast<std::uint8_t>(value >> (8 * i));
    }
    return *this;
  }
  ByteWriter& u8(std::uint8_t value) noexcept { return put(value, 1); }
  ByteWriter& u16(std::uint16_t value) noexcept { return put(value, 2); }
  ByteWriter& u32(std::uint32_t value) noexcept { return put(value, 4); }
  ByteWriter& u64(std::uint64_t value) noexcept { return put(value, 8); }
  ByteWriter& i64(std::int64_t value) noexcept { return put(static_cast<std::uint64_t>(value), 8); }

 private:
  std::uint8_t* out_;
};

/** @brief Reads fields one after the other, least significant byte first. */
class ByteReader {
 public:
  explicit ByteReader(const std::uint8_t* in) noexcept : in_(in) {}

  /** @brief Steps over `bytes` bytes. */
  void skip(std::size_t bytes) noexcept { in_ += bytes; }

  /** @brief Reads `bytes` (at most 8) bytes as an unsigned value. */
  std::uint64_t get(std::size_t bytes) noexcept {
    std::uint64_t value = 0;
    for (std::size_t i = 0; i < bytes; ++i) {
      value |= static_cast<std::uint64_t>(*in_++) << (8 * i);
    }
    return value;
  }
  std::uint8_t u8() noexcept { return static_cast<std::uint8_t>(get(1)); }
  std::uint16_t u16() noexcept { return static_cast<std::uint16_t>(get(2)); }
  std::uint32_t u32() noexcept { return static_cast<std::uint32_t>(get(4)); }
  std::uint64_t u64() noexcept { return get(8); }
  std::int64_t i64() noexcept { return static_cast<std::int64_t>(get(8)); }

 private:
  const std::uint8_t* in_;
};

}  // namespace holoscan::ucx::detail
