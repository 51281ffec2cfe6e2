#pragma once
// Little-endian field access for the IPC wire formats (descriptor and channel frames). The caller
// checks sizes first; these helpers only fix the byte order, so that the format is the same on
// every host whatever its own order.
#include <array>
#include <cstddef>
#include <cstdint>

namespace holoscan::ipc::detail {

inline void put_le(std::uint8_t* out, std::uint64_t value, std::size_t bytes) noexcept {
  for (std::size_t i = 0; i < bytes; ++i) {
    out[i] = static_cast<std::uint8_t>(value >> (8 * i));
  }
}

inline std::uint64_t get_le(const std::uint8_t* in, std::size_t bytes) noexcept {
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < bytes; ++i) {
    value |= static_cast<std::uint64_t>(in[i]) << (8 * i);
  }
  return value;
}

inline void put_u8(std::uint8_t* out, std::uint8_t value) noexcept { *out = value; }
inline void put_u16(std::uint8_t* out, std::uint16_t value) noexcept { put_le(out, value, 2); }
inline void put_u32(std::uint8_t* out, std::uint32_t value) noexcept { put_le(out, value, 4); }
inline void put_u64(std::uint8_t* out, std::uint64_t value) noexcept { put_le(out, value, 8); }

inline std::uint8_t get_u8(const std::uint8_t* in) noexcept { return *in; }
inline std::uint16_t get_u16(const std::uint8_t* in) noexcept {
  return static_cast<std::uint16_t>(get_le(in, 2));
}
inline std::uint32_t get_u32(const std::uint8_t* in) noexcept {
  return static_cast<std::uint32_t>(get_le(in, 4));
}
inline std::uint64_t get_u64(const std::uint8_t* in) noexcept { return get_le(in, 8); }

template <std::size_t N>
void put_bytes(std::uint8_t* out, const std::array<std::uint8_t, N>& bytes) noexcept {
  for (std::size_t i = 0; i < N; ++i) {
    out[i] = bytes[i];
  }
}

template <std::size_t N>
std::array<std::uint8_t, N> get_bytes(const std::uint8_t* in) noexcept {
  std::array<std::uint8_t, N> bytes{};
  for (std::size_t i = 0; i < N; ++i) {
    bytes[i] = in[i];
  }
  return bytes;
}

inline bool all_zero(const std::uint8_t* bytes, std::size_t size) noexcept {
  for (std::size_t i = 0; i < size; ++i) {
    if (bytes[i] != 0) {
      return false;
    }
  }
  return true;
}

template <std::size_t N>
bool all_zero(const std::array<std::uint8_t, N>& bytes) noexcept {
  return all_zero(bytes.data(), N);
}

}  // namespace holoscan::ipc::detail
