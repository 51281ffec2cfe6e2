// The descriptor's wire format, version 1: a fixed little-endian header, then ndim extents and
// ndim strides. Every byte is either a checked field or an opaque handle, so the encoding is
// canonical: bytes that decode re-encode to the same bytes.
#include <cstdint>
#include <optional>
#include <string>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "holoscan/ipc/descriptor.hpp"
#include "ipc/ipc_error.hpp"
#include "ipc/wire/ipc_frame.hpp"
#include "ipc/wire/ipc_wire.hpp"

namespace holoscan::ipc {
namespace {

// The opaque fields must hold what the GPU side puts in them.
static_assert(sizeof(cudaIpcMemHandle_t) == kIpcHandleBytes, "cudaIpcMemHandle_t size");
static_assert(sizeof(cudaIpcEventHandle_t) == kIpcHandleBytes, "cudaIpcEventHandle_t size");
static_assert(sizeof(cudaMemPoolPtrExportData) <= kIpcHandleBytes, "pool export data size");
static_assert(sizeof(CUuuid) == sizeof(TensorDescriptor::device_uuid), "CUuuid size");

constexpr std::uint32_t kMagic = 0x544c4448;  // "HDLT" in memory order

// Byte offsets of the version-1 header fields.
constexpr std::size_t kMagicAt = 0;
constexpr std::size_t kVersionAt = 4;
constexpr std::size_t kTotalLengthAt = 8;
constexpr std::size_t kPreambleBytes = 12;  // magic, version, total length: read before the rest
constexpr std::size_t kHandleKindAt = 12;
constexpr std::size_t kExportIdAt = 16;
constexpr std::size_t kAllocationIdAt = 24;
constexpr std::size_t kHandleBytesAt = 32;
constexpr std::size_t kAllocationBytesAt = 96;
constexpr std::size_t kOffsetAt = 104;
constexpr std::size_t kDeviceUuidAt = 112;
constexpr std::size_t kDtypeCodeAt = 128;
constexpr std::size_t kDtypeBitsAt = 129;
constexpr std::size_t kDtypeLanesAt = 130;
constexpr std::size_t kNdimAt = 132;
constexpr std::size_t kFlagsAt = 136;
constexpr std::size_t kExporterPidAt = 144;
constexpr std::size_t kHasEventAt = 148;
constexpr std::size_t kReservedAt = 149;
constexpr std::size_t kReservedBytes = 3;
constexpr std::size_t kReadinessEventAt = 152;
constexpr std::size_t kDimsAt = 216;
static_assert(kReadinessEventAt + kIpcHandleBytes == kDimsAt, "header fields are contiguous");
static_assert(kDimsAt == kDescriptorHeaderBytes, "header size");

constexpr std::size_t encoded_size(std::size_t ndim) {
  return kDescriptorHeaderBytes + 2 * sizeof(std::int64_t) * ndim;
}

Error invalid(const std::string& what) { return detail::invalid_argument("ipc descriptor", what); }

// Checks what must hold before any field past the preamble may be read.
expected<std::size_t, Error> check_framing(const std::uint8_t* bytes, std::size_t size) {
  if (bytes == nullptr || size < kPreambleBytes) {
    return make_unexpected(invalid(std::to_string(size) + " bytes, too few for magic, version " +
                                   "and total_length (" + std::to_string(kPreambleBytes) + ")"));
  }
  if (const std::uint32_t magic = detail::get_u32(bytes + kMagicAt); magic != kMagic) {
    return make_unexpected(
        invalid("magic " + detail::hex(magic) + " is not \"HDLT\" (" + detail::hex(kMagic) + ")"));
  }
  if (const std::uint32_t version = detail::get_u32(bytes + kVersionAt);
      version != kDescriptorVersion) {
    return make_unexpected(invalid("descriptor version " + std::to_string(version) +
                                   ", this build reads " + std::to_string(kDescriptorVersion)));
  }
  const std::uint32_t total = detail::get_u32(bytes + kTotalLengthAt);
  if (total != size) {
    return make_unexpected(invalid("total_length " + std::to_string(total) +
                                   " does not match the " + std::to_string(size) + " bytes given"));
  }
  if (size < kDescriptorHeaderBytes) {
    return make_unexpected(invalid("total_length " + std::to_string(total) + " is shorter than " +
                                   "the " + std::to_string(kDescriptorHeaderBytes) +
                                   "-byte header"));
  }
  const std::uint32_t ndim = detail::get_u32(bytes + kNdimAt);
  if (ndim > kMaxDescriptorDims) {
    return make_unexpected(invalid("ndim " + std::to_string(ndim) + " is outside [0, " +
                                   std::to_string(kMaxDescriptorDims) + "]"));
  }
  if (size != encoded_size(ndim)) {
    return make_unexpected(invalid("total_length " + std::to_string(total) + " does not match " +
                                   "ndim " + std::to_string(ndim) + " (" +
                                   std::to_string(encoded_size(ndim)) + " bytes)"));
  }
  if (!detail::all_zero(bytes + kReservedAt, kReservedBytes)) {
    return make_unexpected(invalid("reserved bytes after has_readiness_event are not zero"));
  }
  if (const std::uint8_t has_event = detail::get_u8(bytes + kHasEventAt); has_event > 1) {
    return make_unexpected(
        invalid("has_readiness_event is " + std::to_string(has_event) + ", must be 0 or 1"));
  }
  return std::size_t{ndim};
}

}  // namespace

bool operator==(const TensorDescriptor& a, const TensorDescriptor& b) noexcept {
  return a.export_id == b.export_id && a.allocation_id == b.allocation_id &&
         a.handle_kind == b.handle_kind && a.handle_bytes == b.handle_bytes &&
         a.allocation_bytes == b.allocation_bytes && a.offset == b.offset &&
         a.device_uuid == b.device_uuid && a.dtype.code == b.dtype.code &&
         a.dtype.bits == b.dtype.bits && a.dtype.lanes == b.dtype.lanes && a.shape == b.shape &&
         a.strides == b.strides && a.dlpack_flags == b.dlpack_flags &&
         a.has_readiness_event == b.has_readiness_event && a.readiness_event == b.readiness_event &&
         a.exporter_pid == b.exporter_pid;
}

expected<std::vector<std::uint8_t>, Error> encode(const TensorDescriptor& d) {
  if (auto valid = validate(d); !valid) {
    return make_unexpected(std::move(valid.error()));
  }
  const std::size_t ndim = d.shape.size();
  std::vector<std::uint8_t> out(encoded_size(ndim), 0);
  std::uint8_t* p = out.data();
  detail::put_u32(p + kMagicAt, kMagic);
  detail::put_u32(p + kVersionAt, kDescriptorVersion);
  detail::put_u32(p + kTotalLengthAt, static_cast<std::uint32_t>(out.size()));
  detail::put_u32(p + kHandleKindAt, static_cast<std::uint32_t>(d.handle_kind));
  detail::put_u64(p + kExportIdAt, d.export_id);
  detail::put_u64(p + kAllocationIdAt, d.allocation_id);
  detail::put_bytes(p + kHandleBytesAt, d.handle_bytes);
  detail::put_u64(p + kAllocationBytesAt, d.allocation_bytes);
  detail::put_u64(p + kOffsetAt, d.offset);
  detail::put_bytes(p + kDeviceUuidAt, d.device_uuid);
  detail::put_u8(p + kDtypeCodeAt, d.dtype.code);
  detail::put_u8(p + kDtypeBitsAt, d.dtype.bits);
  detail::put_u16(p + kDtypeLanesAt, d.dtype.lanes);
  detail::put_u32(p + kNdimAt, static_cast<std::uint32_t>(ndim));
  detail::put_u64(p + kFlagsAt, d.dlpack_flags);
  detail::put_u32(p + kExporterPidAt, d.exporter_pid);
  detail::put_u8(p + kHasEventAt, d.has_readiness_event ? 1 : 0);
  detail::put_bytes(p + kReadinessEventAt, d.readiness_event);
  for (std::size_t i = 0; i < ndim; ++i) {
    detail::put_u64(p + kDimsAt + 8 * i, static_cast<std::uint64_t>(d.shape[i]));
    detail::put_u64(p + kDimsAt + 8 * (ndim + i), static_cast<std::uint64_t>(d.strides[i]));
  }
  return out;
}

namespace detail {

std::optional<std::uint64_t> descriptor_export_id(const std::uint8_t* bytes,
                                                  std::size_t size) noexcept {
  if (bytes == nullptr || size < kDescriptorHeaderBytes) {
    return std::nullopt;
  }
  return get_u64(bytes + kExportIdAt);
}

std::uint64_t descriptor_fd_allocation(const std::uint8_t* bytes, std::size_t size) noexcept {
  if (bytes == nullptr || size < kDescriptorHeaderBytes ||
      get_u32(bytes + kHandleKindAt) != static_cast<std::uint32_t>(MemoryHandleKind::kPosixFd)) {
    return 0;
  }
  return get_u64(bytes + kAllocationIdAt);
}

}  // namespace detail

expected<TensorDescriptor, Error> decode(const std::uint8_t* bytes, std::size_t size) {
  auto ndim = check_framing(bytes, size);
  if (!ndim) {
    return make_unexpected(std::move(ndim.error()));
  }
  TensorDescriptor d;
  d.handle_kind = static_cast<MemoryHandleKind>(detail::get_u32(bytes + kHandleKindAt));
  d.export_id = detail::get_u64(bytes + kExportIdAt);
  d.allocation_id = detail::get_u64(bytes + kAllocationIdAt);
  d.handle_bytes = detail::get_bytes<kIpcHandleBytes>(bytes + kHandleBytesAt);
  d.allocation_bytes = detail::get_u64(bytes + kAllocationBytesAt);
  d.offset = detail::get_u64(bytes + kOffsetAt);
  d.device_uuid = detail::get_bytes<sizeof(d.device_uuid)>(bytes + kDeviceUuidAt);
  d.dtype.code = detail::get_u8(bytes + kDtypeCodeAt);
  d.dtype.bits = detail::get_u8(bytes + kDtypeBitsAt);
  d.dtype.lanes = detail::get_u16(bytes + kDtypeLanesAt);
  d.dlpack_flags = detail::get_u64(bytes + kFlagsAt);
  d.exporter_pid = detail::get_u32(bytes + kExporterPidAt);
  d.has_readiness_event = detail::get_u8(bytes + kHasEventAt) == 1;
  d.readiness_event = detail::get_bytes<kIpcHandleBytes>(bytes + kReadinessEventAt);
  d.shape.resize(*ndim);
  d.strides.resize(*ndim);
  for (std::size_t i = 0; i < *ndim; ++i) {
    d.shape[i] = static_cast<std::int64_t>(detail::get_u64(bytes + kDimsAt + 8 * i));
    d.strides[i] = static_cast<std::int64_t>(detail::get_u64(bytes + kDimsAt + 8 * (*ndim + i)));
  }
  if (auto valid = validate(d); !valid) {
    return make_unexpected(std::move(valid.error()));
  }
  return d;
}

}  // namespace holoscan::ipc
