#pragma once
// The DLPack tensor a fuzzer's bytes describe, read the same way by every fuzzer over DLPack
// metadata, so that their seed corpora are interchangeable.
#include <dlpack/dlpack.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace holoscan_fuzz {

/** @brief Aborts the fuzzer with `what` when `condition` does not hold. */
inline void check(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "invariant broken: %s\n", what);
    std::abort();
  }
}

/** @brief Reads the fuzzer's bytes as a stream of fields; past the end every field is zero. */
class Bytes {
 public:
  Bytes(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  /** @brief The next sizeof(T) bytes (zero past the end). */
  template <class T>
  T take() {
    T value{};
    const std::size_t n = sizeof(T) < size_ - offset_ ? sizeof(T) : size_ - offset_;
    std::memcpy(&value, data_ + offset_, n);
    offset_ += n;
    return value;
  }
  /** @brief A 64-bit value biased towards the edges that break arithmetic. */
  std::int64_t extent() {
    const auto kind = take<std::uint8_t>();
    switch (kind % 8) {
      case 0:
        return 0;
      case 1:
        return 1;
      case 2:
        return INT64_MAX - take<std::uint8_t>();
      case 3:
        return INT64_MIN + take<std::uint8_t>();
      case 4:
        return static_cast<std::int64_t>(take<std::uint64_t>());
      case 5:
        return -static_cast<std::int64_t>(take<std::uint8_t>());
      case 6:
        return std::int64_t{1} << (take<std::uint8_t>() % 63);
      default:
        return take<std::uint8_t>();
    }
  }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t offset_ = 0;
};

/** @brief A DLTensor read from the bytes, with the storage its shape and strides point at. */
struct Input {
  std::vector<std::int64_t> shape;    ///< What view.shape points at (unless it is null).
  std::vector<std::int64_t> strides;  ///< What view.strides points at (unless it is null).
  DLTensor view{};                    ///< The producer's metadata.
  std::uint64_t flags = 0;            ///< DLPack flag bits (mostly the four lowest; any 64 bits).
  bool legacy = false;                ///< Import it as a legacy DLManagedTensor.
  DLPackVersion version{};            ///< The producer's version (sometimes another major).

  Input() = default;
  Input(const Input&) = delete;  // the view points into this object
  Input& operator=(const Input&) = delete;
};

/** @brief Fills `in` from the bytes (ndim may be out of range, shape may be null). */
inline void read_input(Bytes& bytes, Input& in) {
  const auto shape_kind = bytes.take<std::uint8_t>();
  in.legacy = (shape_kind & 1) != 0;
  const std::int32_t ndim = static_cast<std::int8_t>(bytes.take<std::uint8_t>()) % 72;
  const auto count = static_cast<std::size_t>(ndim > 0 ? ndim : 0);
  for (std::size_t i = 0; i < count; ++i) {
    in.shape.push_back(bytes.extent());
  }
  const bool has_strides = (shape_kind & 2) != 0;
  for (std::size_t i = 0; has_strides && i < count; ++i) {
    in.strides.push_back(bytes.extent());
  }
  static std::uint8_t storage[256];
  switch ((shape_kind >> 2) % 4) {
    case 0:
      in.view.data = nullptr;
      break;
    case 1:
      in.view.data = storage;
      break;
    default:
      in.view.data =
          reinterpret_cast<void*>(static_cast<std::uintptr_t>(bytes.take<std::uint64_t>()));
      break;
  }
  in.view.ndim = ndim;
  in.view.shape = (shape_kind & 16) != 0 ? nullptr : in.shape.data();
  in.view.strides = has_strides ? in.strides.data() : nullptr;
  in.view.dtype = DLDataType{bytes.take<std::uint8_t>(), bytes.take<std::uint8_t>(),
                             bytes.take<std::uint16_t>()};
  in.view.device = DLDevice{static_cast<DLDeviceType>(bytes.take<std::uint8_t>() % 24),
                            static_cast<std::int8_t>(bytes.take<std::uint8_t>())};
  in.view.byte_offset =
      (shape_kind & 32) != 0 ? bytes.take<std::uint64_t>() : bytes.take<std::uint8_t>();
  // Mostly the three known bits and bit 3; a quarter of the time any 64 bits.
  const auto flag_kind = bytes.take<std::uint8_t>();
  in.flags = flag_kind % 4 == 0 ? bytes.take<std::uint64_t>()
                                : static_cast<std::uint64_t>((flag_kind >> 2) % 16);
  // Mostly this build's major version; sometimes the next one, or 0 (DLPack before 1.0).
  const auto major_kind = bytes.take<std::uint8_t>() % 8;
  const std::uint32_t major = major_kind == 0   ? DLPACK_MAJOR_VERSION + 1u
                              : major_kind == 1 ? 0u
                                                : static_cast<std::uint32_t>(DLPACK_MAJOR_VERSION);
  const auto minor = static_cast<std::uint32_t>(bytes.take<std::uint8_t>() % 5);
  in.version = {major, minor};
}

}  // namespace holoscan_fuzz
