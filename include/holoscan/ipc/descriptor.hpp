#pragma once
/**
 * @file
 * @brief A tensor exported to another process, as plain fields and as versioned wire bytes.
 *
 * The descriptor names the memory (a shareable handle), where the tensor lies in it, its layout,
 * the device by UUID (ordinals differ between processes) and the exporter's readiness point. The
 * bytes come from another process, so decode() trusts none of them.
 */
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include <dlpack/dlpack.h>

#include "holoscan/expected.hpp"
#include "holoscan/export.hpp"

namespace holoscan::ipc {

/** @brief The descriptor wire format this build writes and reads. */
inline constexpr std::uint32_t kDescriptorVersion = 1;

/** @brief Most dimensions a descriptor carries (part of the wire format, version 1). */
inline constexpr std::size_t kMaxDescriptorDims = 32;

/** @brief Bytes of an encoded descriptor with no dimensions. */
inline constexpr std::size_t kDescriptorHeaderBytes = 216;

/** @brief Bytes of the largest encoded descriptor (kMaxDescriptorDims dimensions). */
inline constexpr std::size_t kMaxDescriptorBytes =
    kDescriptorHeaderBytes + 2 * sizeof(std::int64_t) * kMaxDescriptorDims;

/** @brief Bytes of an opaque memory or event handle (cudaIpcMemHandle_t, cudaIpcEventHandle_t). */
inline constexpr std::size_t kIpcHandleBytes = 64;

/** @brief How the allocation behind a descriptor reaches the importer. */
enum class MemoryHandleKind : std::uint32_t {
  kPosixFd = 1,  ///< VMM or pool shareable handle: a POSIX fd travels beside the bytes.
  kCudaIpc = 2,  ///< Legacy cudaIpcMemHandle_t in handle_bytes.
  kFake = 3,     ///< No memory at all: protocol tests.
};

/** @brief An exported tensor: memory handle, placement, layout, device and readiness point. */
struct HOLOSCAN_DLPACK_API TensorDescriptor {
  /// Unique per export within the exporter process, nonzero, and increasing on each connection in
  /// the order sent (an Exporter numbers them so): an importer refuses one at or below the
  /// highest that connection's channel carried, unless it holds it.
  std::uint64_t export_id = 0;
  std::uint64_t allocation_id = 0;  ///< Unique per allocation within the exporter: a mapping key.
  MemoryHandleKind handle_kind = MemoryHandleKind::kFake;    ///< How handle_bytes is read.
  std::array<std::uint8_t, kIpcHandleBytes> handle_bytes{};  ///< Opaque handle (or pool data).
  std::uint64_t allocation_bytes = 0;  ///< Size of the whole allocation the handle maps.
  std::uint64_t offset = 0;            ///< Element 0's address minus the allocation base, in bytes.
  std::array<std::uint8_t, 16> device_uuid{};  ///< CUuuid of the exporter's device.
  DLDataType dtype{};                          ///< Element type, as DLPack 1.3 defines it.
  std::vector<std::int64_t> shape;             ///< Extents, at most kMaxDescriptorDims.
  std::vector<std::int64_t> strides;           ///< In elements, one per extent, always explicit.
  std::uint64_t dlpack_flags = 0;              ///< DLPACK_FLAG_BITMASK_* bits.
  bool has_readiness_event = false;            ///< Whether readiness_event holds a handle.
  std::array<std::uint8_t, kIpcHandleBytes> readiness_event{};  ///< cudaIpcEventHandle_t bytes.
  std::uint32_t exporter_pid = 0;  ///< The exporter's process id, as it sees itself.
};

/** @brief Field-by-field equality (DLDataType has no operator== of its own). */
HOLOSCAN_DLPACK_API bool operator==(const TensorDescriptor& a, const TensorDescriptor& b) noexcept;

/** @brief Field-by-field inequality. */
inline bool operator!=(const TensorDescriptor& a, const TensorDescriptor& b) noexcept {
  return !(a == b);
}

/** @brief Checks every field; kInvalidArgument naming the first bad one. */
HOLOSCAN_DLPACK_API expected<void, Error> validate(const TensorDescriptor& descriptor);

/** @brief The wire bytes of a valid descriptor (version 1, little-endian); refuses invalid ones. */
HOLOSCAN_DLPACK_API expected<std::vector<std::uint8_t>, Error> encode(
    const TensorDescriptor& descriptor);

/** @brief Parses and validates wire bytes; kInvalidArgument naming the field on any defect. */
HOLOSCAN_DLPACK_API expected<TensorDescriptor, Error> decode(const std::uint8_t* bytes,
                                                             std::size_t size);

}  // namespace holoscan::ipc
