// Validation of a TensorDescriptor's fields. The descriptor crossed a process boundary, so every
// field is checked, and all arithmetic on them is overflow-checked: an importer maps
// [offset, offset + span) of a foreign allocation and must never be talked into more.
#include <cstdint>
#include <string>

#include "holoscan/ipc/descriptor.hpp"
#include "ipc/ipc_error.hpp"
#include "ipc/wire/ipc_wire.hpp"

namespace holoscan::ipc {
namespace {

// DLPack type codes and flag bits are part of the wire format, so they are DLPack 1.3's whatever
// header this build compiles against: a 1.0 build still reads what a 1.3 exporter writes.
constexpr std::uint8_t kFirstFloat6Code = 15;  // kDLFloat6_e2m3fn, kDLFloat6_e3m2fn
constexpr std::uint8_t kFloat4Code = 17;       // kDLFloat4_e2m1fn, the last code of DLPack 1.3
constexpr std::uint64_t kSubBytePaddedFlag = std::uint64_t{1} << 2;  // IS_SUBBYTE_TYPE_PADDED
constexpr std::uint64_t kKnownFlags = 0x7;  // READ_ONLY, IS_COPIED, IS_SUBBYTE_TYPE_PADDED

Error invalid(const std::string& what) { return detail::invalid_argument("ipc descriptor", what); }

// Bits a sub-byte floating-point code requires, or 0 for a byte-sized code.
int sub_byte_bits(std::uint8_t code) noexcept {
  if (code == kFloat4Code) {
    return 4;
  }
  return code >= kFirstFloat6Code && code < kFloat4Code ? 6 : 0;
}

expected<void, Error> check_dtype(DLDataType dtype) {
  if (dtype.code > kFloat4Code) {
    return make_unexpected(
        invalid("dtype.code " + std::to_string(dtype.code) + " is not a DLPack 1.3 type code"));
  }
  if (dtype.bits == 0) {
    return make_unexpected(invalid("dtype.bits is 0"));
  }
  if (dtype.lanes == 0) {
    return make_unexpected(invalid("dtype.lanes is 0"));
  }
  const int required_bits = sub_byte_bits(dtype.code);
  if (required_bits != 0 && (dtype.bits != required_bits || dtype.lanes != 1)) {
    return make_unexpected(invalid("dtype.bits " + std::to_string(dtype.bits) + " (lanes " +
                                   std::to_string(dtype.lanes) + ") does not match dtype.code " +
                                   std::to_string(dtype.code)));
  }
  if (required_bits == 0 && dtype.bits % 8 != 0) {
    return make_unexpected(
        invalid("dtype.bits " + std::to_string(dtype.bits) + " is not a whole number of bytes"));
  }
  return {};
}

// Floor and ceiling of value / 8 that cannot overflow (value + 7 could).
std::int64_t floor_div8(std::int64_t value) noexcept { return value / 8 - (value % 8 < 0 ? 1 : 0); }
std::int64_t ceil_div8(std::int64_t value) noexcept { return value / 8 + (value % 8 > 0 ? 1 : 0); }

// Bytes [*begin, *end) relative to element 0 that elements first..last occupy; false on overflow.
// Packed sub-byte elements share bytes, so their bounds are rounded outwards.
bool element_bytes(std::int64_t first, std::int64_t last, DLDataType dtype, std::uint64_t flags,
                   std::int64_t* begin, std::int64_t* end) noexcept {
  const std::int64_t bits = std::int64_t{dtype.bits} * dtype.lanes;
  const bool byte_addressed = bits % 8 == 0 || (flags & kSubBytePaddedFlag) != 0;
  const std::int64_t unit = byte_addressed ? (bits + 7) / 8 : bits;
  std::int64_t past_last = 0;
  if (__builtin_add_overflow(last, 1, &past_last) || __builtin_mul_overflow(first, unit, begin) ||
      __builtin_mul_overflow(past_last, unit, end)) {
    return false;
  }
  if (!byte_addressed) {
    *begin = floor_div8(*begin);
    *end = ceil_div8(*end);
  }
  return true;
}

expected<void, Error> check_layout(const TensorDescriptor& d) {
  const std::size_t ndim = d.shape.size();
  if (ndim > kMaxDescriptorDims) {
    return make_unexpected(invalid("ndim " + std::to_string(ndim) + " is outside [0, " +
                                   std::to_string(kMaxDescriptorDims) + "]"));
  }
  if (d.strides.size() != ndim) {
    return make_unexpected(invalid("strides has " + std::to_string(d.strides.size()) +
                                   " entries, shape has " + std::to_string(ndim)));
  }
  // Element indices (in units of elements, relative to element 0) of the lowest and highest
  // addressed element; negative strides pull the lowest below element 0.
  std::int64_t count = 1;
  std::int64_t lowest = 0;
  std::int64_t highest = 0;
  bool overflow = false;
  for (std::size_t i = 0; i < ndim; ++i) {
    const std::int64_t extent = d.shape[i];
    if (extent < 0) {
      return make_unexpected(invalid("shape[" + std::to_string(i) + "] is " +
                                     std::to_string(extent) + ", must be >= 0"));
    }
    if (__builtin_mul_overflow(count, extent, &count)) {
      return make_unexpected(invalid("shape: element count overflows int64"));
    }
    std::int64_t reach = 0;
    if (extent > 0) {
      overflow |= __builtin_mul_overflow(extent - 1, d.strides[i], &reach);
      overflow |= reach < 0 ? __builtin_add_overflow(lowest, reach, &lowest)
                            : __builtin_add_overflow(highest, reach, &highest);
    }
  }
  std::int64_t nbytes = 0;
  std::int64_t unused = 0;
  if (!element_bytes(0, count - 1, d.dtype, d.dlpack_flags, &unused, &nbytes)) {
    return make_unexpected(invalid("shape: byte size overflows int64"));
  }
  if (count == 0) {
    // No element is addressed, so strides are free; the offset still lies in the allocation.
    if (d.offset > d.allocation_bytes) {
      return make_unexpected(invalid("offset " + std::to_string(d.offset) +
                                     " is past allocation_bytes " +
                                     std::to_string(d.allocation_bytes)));
    }
    return {};
  }
  std::int64_t begin = 0;
  std::int64_t end = 0;
  if (overflow || !element_bytes(lowest, highest, d.dtype, d.dlpack_flags, &begin, &end)) {
    return make_unexpected(invalid("strides: addressed span overflows int64"));
  }
  // allocation_bytes <= INT64_MAX was checked, so an offset inside it fits int64 too.
  const auto offset = static_cast<std::int64_t>(d.offset);
  const auto limit = static_cast<std::int64_t>(d.allocation_bytes);
  if (d.offset > d.allocation_bytes || __builtin_add_overflow(offset, begin, &begin) ||
      __builtin_add_overflow(offset, end, &end) || begin < 0 || end > limit) {
    return make_unexpected(invalid("offset " + std::to_string(d.offset) + " with shape and " +
                                   "strides addresses bytes outside the allocation's [0, " +
                                   std::to_string(d.allocation_bytes) + ")"));
  }
  return {};
}

}  // namespace

expected<void, Error> validate(const TensorDescriptor& d) {
  const auto kind = static_cast<std::uint32_t>(d.handle_kind);
  if (kind < static_cast<std::uint32_t>(MemoryHandleKind::kPosixFd) ||
      kind > static_cast<std::uint32_t>(MemoryHandleKind::kFake)) {
    return make_unexpected(invalid("handle_kind " + std::to_string(kind) +
                                   " is not kPosixFd (1), kCudaIpc (2) or kFake (3)"));
  }
  if (d.allocation_bytes == 0 || d.allocation_bytes > static_cast<std::uint64_t>(INT64_MAX)) {
    return make_unexpected(invalid("allocation_bytes " + std::to_string(d.allocation_bytes) +
                                   " is outside [1, INT64_MAX]"));
  }
  if (auto dtype = check_dtype(d.dtype); !dtype) {
    return dtype;
  }
  if ((d.dlpack_flags & ~kKnownFlags) != 0) {
    return make_unexpected(invalid("dlpack_flags " + detail::hex(d.dlpack_flags) +
                                   " has bits DLPack 1.3 does not define"));
  }
  if (auto layout = check_layout(d); !layout) {
    return layout;
  }
  if (!d.has_readiness_event && !detail::all_zero(d.readiness_event)) {
    return make_unexpected(
        invalid("readiness_event is not all zero while has_readiness_event is false"));
  }
  if (d.exporter_pid == 0 || d.exporter_pid > static_cast<std::uint32_t>(INT32_MAX)) {
    return make_unexpected(
        invalid("exporter_pid " + std::to_string(d.exporter_pid) + " is not a process id"));
  }
  return {};
}

}  // namespace holoscan::ipc
