#include "dlpack/dlpack_validate.hpp"

#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <type_traits>

#include "holoscan/tensor.hpp"

namespace holoscan::detail {
namespace {

constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kInt64Min = std::numeric_limits<std::int64_t>::min();
constexpr std::uint64_t kByteLimit = static_cast<std::uint64_t>(kInt64Max);

// Enumerators added by later DLPack minors, detected from the header this build compiles against.
template <class E, class = void>
struct HasTrainiumDevice : std::false_type {};
template <class E>
struct HasTrainiumDevice<E, std::void_t<decltype(E::kDLTrn)>> : std::true_type {};

template <class E, class = void>
struct HasFloat4Type : std::false_type {};
template <class E>
struct HasFloat4Type<E, std::void_t<decltype(E::kDLFloat4_e2m1fn)>> : std::true_type {};

template <class E>
constexpr int last_device_type() {
  if constexpr (HasTrainiumDevice<E>::value) {
    return static_cast<int>(E::kDLTrn);
  } else {
    return static_cast<int>(E::kDLMAIA);
  }
}

template <class E>
constexpr std::uint8_t last_dtype_code() {
  if constexpr (HasFloat4Type<E>::value) {
    return static_cast<std::uint8_t>(E::kDLFloat4_e2m1fn);
  } else {
    return static_cast<std::uint8_t>(E::kDLBool);
  }
}

// Bits a sub-byte floating-point code requires (DLPack 1.3's numbering, which later minors keep),
// or 0 when the code is byte-sized. A build whose header lacks them refuses these codes earlier.
int required_sub_byte_bits(std::uint8_t code) noexcept {
  constexpr std::uint8_t kFloat6First = 15;  // kDLFloat6_e2m3fn, kDLFloat6_e3m2fn
  if (code == kDLPack13LastDtypeCode) {
    return 4;
  }
  return code >= kFloat6First && code < kDLPack13LastDtypeCode ? 6 : 0;
}

std::uint64_t element_bits(DLDataType dtype) noexcept {
  return std::uint64_t{dtype.bits} * dtype.lanes;
}

bool packed_sub_byte(DLDataType dtype, std::uint64_t flags) noexcept {
  return element_bits(dtype) % 8 != 0 && (flags & kSubBytePaddedFlag) == 0;
}

LayoutFault dtype_fault(DLDataType dtype, std::uint8_t last_code) noexcept {
  if (dtype.code > last_code) {
    return LayoutFault::kDtypeCode;
  }
  if (dtype.lanes == 0) {
    return LayoutFault::kDtypeLanes;
  }
  if (dtype.bits == 0) {
    return LayoutFault::kDtypeBits;
  }
  const int sub_byte_bits = required_sub_byte_bits(dtype.code);
  if (sub_byte_bits != 0) {
    // One lane, packed or padded (DLPack 1.1), or lanes that fill whole bytes, an element of
    // whole bytes like any other (PyTorch's float4_e2m1fn_x2: two lanes a byte).
    if (dtype.bits != sub_byte_bits || (dtype.lanes != 1 && element_bits(dtype) % 8 != 0)) {
      return LayoutFault::kDtypeSubByte;
    }
  } else if (dtype.bits % 8 != 0) {
    return LayoutFault::kDtypeWholeBytes;
  }
  return LayoutFault::kNone;
}

// ceil(elements * bits / 8) without forming the product: false when the result, or the product
// of the whole bytes, does not fit int64.
bool packed_bytes(std::uint64_t elements, std::uint64_t bits, std::int64_t* bytes) noexcept {
  std::uint64_t whole = 0;
  if (__builtin_mul_overflow(elements / 8, bits, &whole)) {
    return false;
  }
  const std::uint64_t rest = ((elements % 8) * bits + 7) / 8;
  if (whole > kByteLimit || rest > kByteLimit - whole) {
    return false;
  }
  *bytes = static_cast<std::int64_t>(whole + rest);
  return true;
}

// How elements become bytes: whole items, or bits rounded up to bytes for packed sub-byte types.
class Unit {
 public:
  Unit(DLDataType dtype, std::uint64_t flags) noexcept
      : bits_(element_bits(dtype)),
        item_(static_cast<std::int64_t>((bits_ + 7) / 8)),
        packed_(packed_sub_byte(dtype, flags)) {}

  bool packed() const noexcept { return packed_; }
  std::int64_t item() const noexcept { return item_; }

  // Bytes that `elements` consecutive elements occupy; false when they do not fit int64.
  bool bytes_of(std::uint64_t elements, std::int64_t* bytes) const noexcept {
    if (packed_) {
      return packed_bytes(elements, bits_, bytes);
    }
    std::uint64_t product = 0;
    if (__builtin_mul_overflow(elements, static_cast<std::uint64_t>(item_), &product) ||
        product > kByteLimit) {
      return false;
    }
    *bytes = static_cast<std::int64_t>(product);
    return true;
  }

  // A stride in elements as bytes (packed: the fraction of a byte rounded away from zero); false
  // when it does not fit [-INT64_MAX, INT64_MAX].
  bool stride_bytes(std::int64_t stride, std::int64_t* bytes) const noexcept {
    const std::uint64_t magnitude =
        stride < 0 ? 0 - static_cast<std::uint64_t>(stride) : static_cast<std::uint64_t>(stride);
    std::int64_t positive = 0;
    if (!bytes_of(magnitude, &positive)) {
      return false;
    }
    *bytes = stride < 0 ? -positive : positive;
    return true;
  }

 private:
  std::uint64_t bits_;
  std::int64_t item_;
  bool packed_;
};

// Records the first rule broken (at `index` for a per-dimension rule) and returns it.
LayoutFault fault_at(LayoutFacts& facts, LayoutFault fault, std::int32_t index = 0) noexcept {
  facts.fault = fault;
  facts.index = index;
  return fault;
}

// Extents, compact strides, element count (last dimension first), then the payload: each rule in
// its order, so that a refusal names the first rule broken. Also the slow path of check_extents.
[[gnu::noinline, gnu::cold]] LayoutFault attribute_extents(std::int32_t ndim,
                                                           const std::int64_t* shape,
                                                           const Unit& unit, LayoutFacts& facts) {
  std::int64_t size = 1;
  std::int64_t compact = 1;  // the compact row-major stride of the dimension being looked at
  for (std::int32_t i = ndim; i-- > 0;) {
    const std::int64_t extent = shape[i];
    if (extent < 0) {
      return fault_at(facts, LayoutFault::kExtent, i);
    }
    // Strides are computed for zero-size tensors too, and reported in bytes: each must fit.
    std::int64_t compact_bytes = 0;
    if (!unit.bytes_of(static_cast<std::uint64_t>(compact), &compact_bytes)) {
      return fault_at(facts, LayoutFault::kCompactStride, i);
    }
    if (__builtin_mul_overflow(size, extent, &size)) {
      return fault_at(facts, LayoutFault::kElementCount);
    }
    // The product is the next dimension's compact stride; after the first dimension it is none
    // (a zero-size tensor's would-be total need not fit).
    if (i > 0 && __builtin_mul_overflow(compact, extent > 0 ? extent : 1, &compact)) {
      return fault_at(facts, LayoutFault::kCompactStride, i - 1);
    }
  }
  facts.size = size;
  if (!unit.bytes_of(static_cast<std::uint64_t>(size), &facts.nbytes)) {
    return fault_at(facts, LayoutFault::kPayloadBytes);
  }
  return LayoutFault::kNone;
}

// Explicit strides, first dimension first: each in bytes, each dimension's span, then the whole
// span on each side of the first element (in elements until the end, then in bytes). Each rule
// in its order, as attribute_extents; the slow path of check_strides.
[[gnu::noinline, gnu::cold]] LayoutFault attribute_strides(std::int32_t ndim,
                                                           const std::int64_t* shape,
                                                           const std::int64_t* strides,
                                                           const Unit& unit, LayoutFacts& facts) {
  std::uint64_t low = 0;   // elements before the first one
  std::uint64_t high = 0;  // elements after the first one
  bool sum_overflows = false;
  for (std::int32_t i = 0; i < ndim; ++i) {
    const std::int64_t stride = strides[i];
    std::int64_t bytes = 0;
    if (!unit.stride_bytes(stride, &bytes)) {
      return fault_at(facts, LayoutFault::kStrideBytes, i);
    }
    if (facts.size == 0) {
      continue;  // no element is addressed: the strides span nothing
    }
    const std::uint64_t steps = static_cast<std::uint64_t>(shape[i]) - 1;
    const std::uint64_t magnitude =
        stride < 0 ? 0 - static_cast<std::uint64_t>(stride) : static_cast<std::uint64_t>(stride);
    std::uint64_t reach = 0;
    std::int64_t reach_bytes = 0;
    if (__builtin_mul_overflow(magnitude, steps, &reach) || !unit.bytes_of(reach, &reach_bytes)) {
      return fault_at(facts, LayoutFault::kStrideSpan, i);
    }
    std::uint64_t& side = stride < 0 ? low : high;
    sum_overflows |= __builtin_add_overflow(side, reach, &side);
  }
  facts.span_low = 0;
  facts.span_high = 0;
  if (facts.size == 0) {
    return LayoutFault::kNone;
  }
  sum_overflows |= __builtin_add_overflow(high, 1, &high);  // the first element itself
  if (sum_overflows || !unit.bytes_of(high, &facts.span_high) ||
      !unit.bytes_of(low, &facts.span_low)) {
    return fault_at(facts, LayoutFault::kSpan);
  }
  return LayoutFault::kNone;
}

// The fast path of the extent rules, which also writes the extents (and the compact strides):
// the same verdict as attribute_extents, which it defers to for anything but a valid layout.
// Compact strides only grow from the last dimension to the first, so the first dimension's is
// the one that may overflow in bytes.
[[gnu::always_inline]] inline LayoutFault check_extents(std::int32_t ndim,
                                                        const std::int64_t* shape, const Unit& unit,
                                                        bool compact_out, std::int64_t* shape_out,
                                                        std::int64_t* strides_out,
                                                        LayoutFacts& facts) noexcept {
  std::int64_t size = 1;
  std::int64_t compact = 1;
  std::int64_t largest_stride = 1;
  std::int64_t signs = 0;
  bool overflow = false;
  for (std::int32_t i = ndim; i-- > 0;) {
    const std::int64_t extent = shape[i];
    signs |= extent;
    if (shape_out != nullptr) {
      shape_out[i] = extent;
    }
    if (compact_out) {
      strides_out[i] = compact;
    }
    largest_stride = compact;
    overflow |= __builtin_mul_overflow(size, extent, &size);
    overflow |= __builtin_mul_overflow(compact, extent > 0 ? extent : 1, &compact);
  }
  std::int64_t largest_bytes = 0;
  if (signs < 0 || overflow ||
      !unit.bytes_of(static_cast<std::uint64_t>(largest_stride), &largest_bytes) ||
      !unit.bytes_of(static_cast<std::uint64_t>(size), &facts.nbytes)) {
    return attribute_extents(ndim, shape, unit, facts);
  }
  facts.size = size;
  return LayoutFault::kNone;
}

// The fast path of the stride rules, as check_extents is of the extent rules (it copies the
// strides out): a dimension's span fits when the sum of the spans on its side does, and every
// stride fits in bytes when the largest does.
[[gnu::always_inline]] inline LayoutFault check_strides(std::int32_t ndim,
                                                        const std::int64_t* shape,
                                                        const std::int64_t* strides,
                                                        const Unit& unit, std::int64_t* strides_out,
                                                        LayoutFacts& facts) noexcept {
  std::uint64_t largest = 0;
  std::uint64_t low = 0;
  std::uint64_t high = 1;  // the first element itself
  bool overflow = false;
  const bool addressed = facts.size > 0;
  for (std::int32_t i = 0; i < ndim; ++i) {
    const std::int64_t stride = strides[i];
    if (strides_out != nullptr) {
      strides_out[i] = stride;
    }
    const std::uint64_t magnitude =
        stride < 0 ? 0 - static_cast<std::uint64_t>(stride) : static_cast<std::uint64_t>(stride);
    largest = magnitude > largest ? magnitude : largest;
    std::uint64_t reach = 0;
    overflow |= __builtin_mul_overflow(
        magnitude, addressed ? static_cast<std::uint64_t>(shape[i]) - 1 : 0, &reach);
    std::uint64_t& side = stride < 0 ? low : high;
    overflow |= __builtin_add_overflow(side, reach, &side);
  }
  std::int64_t largest_bytes = 0;
  std::int64_t high_bytes = 0;
  std::int64_t low_bytes = 0;
  if (overflow || !unit.bytes_of(largest, &largest_bytes) || !unit.bytes_of(high, &high_bytes) ||
      !unit.bytes_of(low, &low_bytes)) {
    return attribute_strides(ndim, shape, strides, unit, facts);
  }
  facts.span_low = addressed ? low_bytes : 0;
  facts.span_high = addressed ? high_bytes : 0;
  return LayoutFault::kNone;
}

// The rules of ndim, shape, dtype and extents: the part of check_layout's body that reads no
// strides, inlined into both entry points so that the facts are written where the caller keeps
// them (a DLTensor's device and data are checked between the two parts).
[[gnu::always_inline]] inline LayoutFault extent_facts(std::int32_t ndim, const std::int64_t* shape,
                                                       const std::int64_t* strides,
                                                       const Unit& unit, std::int64_t* shape_out,
                                                       std::int64_t* strides_out,
                                                       LayoutFacts& facts) noexcept {
  const bool compact_out = strides == nullptr && strides_out != nullptr;
  return check_extents(ndim, shape, unit, compact_out, shape_out, strides_out, facts);
}

// The rules of the strides, once extent_facts passed.
[[gnu::always_inline]] inline LayoutFault stride_facts(std::int32_t ndim, const std::int64_t* shape,
                                                       const std::int64_t* strides,
                                                       const Unit& unit, std::int64_t* strides_out,
                                                       LayoutFacts& facts) noexcept {
  if (strides == nullptr) {
    facts.span_high = facts.nbytes;  // compact: exactly the payload, from the first element on
    return LayoutFault::kNone;
  }
  return check_strides(ndim, shape, strides, unit, strides_out, facts);
}

// ndim, shape and dtype, before anything that needs the unit.
[[gnu::always_inline]] inline LayoutFault header_facts(std::int32_t ndim, const std::int64_t* shape,
                                                       DLDataType dtype, std::uint64_t flags,
                                                       std::uint8_t last_code,
                                                       LayoutFacts& facts) noexcept {
  facts = LayoutFacts{};
  if (ndim < 0 || ndim > kMaxTensorDims) {
    return fault_at(facts, LayoutFault::kNdim);
  }
  if (ndim > 0 && shape == nullptr) {
    return fault_at(facts, LayoutFault::kShapeNull);
  }
  if (const LayoutFault fault = dtype_fault(dtype, last_code); fault != LayoutFault::kNone) {
    return fault_at(facts, fault);
  }
  // Padding is defined for one sub-byte lane: lanes padded each to a byte, or together, would be
  // read differently by two consumers.
  if ((flags & kSubBytePaddedFlag) != 0 && dtype.lanes != 1 &&
      required_sub_byte_bits(dtype.code) != 0) {
    return fault_at(facts, LayoutFault::kDtypePaddedLanes);
  }
  return LayoutFault::kNone;
}

Error invalid(const char* who, const std::string& what) {
  return Error{ErrorCode::kInvalidArgument, std::string(who) + ": " + what, 0};
}

std::string dtype_words(LayoutFault fault, DLDataType dtype) {
  switch (fault) {
    case LayoutFault::kDtypeCode:
      return "dtype.code " + std::to_string(dtype.code) + " is not a known DLDataTypeCode";
    case LayoutFault::kDtypeLanes:
      return "dtype.lanes is 0";
    case LayoutFault::kDtypeBits:
      return "dtype.bits is 0";
    case LayoutFault::kDtypeSubByte:
      return "dtype.bits " + std::to_string(dtype.bits) + " (lanes " + std::to_string(dtype.lanes) +
             ") does not match dtype.code " + std::to_string(dtype.code);
    case LayoutFault::kDtypePaddedLanes:
      return "dlpack_flags IS_SUBBYTE_TYPE_PADDED with dtype.lanes " + std::to_string(dtype.lanes) +
             ": padding is defined for one sub-byte lane";
    default:  // kDtypeWholeBytes
      return "dtype.bits " + std::to_string(dtype.bits) + " is not a whole number of bytes";
  }
}

std::string layout_words(const LayoutFacts& facts, std::int32_t ndim, const std::int64_t* shape,
                         const std::int64_t* strides, DLDataType dtype) {
  const std::string i = std::to_string(facts.index);
  switch (facts.fault) {
    case LayoutFault::kNdim:
      return "ndim " + std::to_string(ndim) + " is outside [0, " + std::to_string(kMaxTensorDims) +
             "]";
    case LayoutFault::kShapeNull:
      return "shape is null while ndim is " + std::to_string(ndim);
    case LayoutFault::kExtent:
      return "shape[" + i + "] is " + std::to_string(shape[facts.index]) + ", must be >= 0";
    case LayoutFault::kCompactStride:
      return "shape: the compact stride of dimension " + i +
             " overflows int64 in bytes (byte size overflow)";
    case LayoutFault::kElementCount:
      return "shape: element count overflows int64";
    case LayoutFault::kPayloadBytes:
      return "shape: byte size overflows int64";
    case LayoutFault::kStrideBytes:
      return "strides[" + i + "] is " + std::to_string(strides[facts.index]) +
             ", too large to express in bytes";
    case LayoutFault::kStrideSpan:
      return "strides[" + i + "] with shape[" + i + "]: the addressed span overflows int64";
    case LayoutFault::kSpan:
      return "strides: addressed span overflows int64";
    default:
      return dtype_words(facts.fault, dtype);
  }
}

}  // namespace

std::uint64_t known_flag_bits() noexcept {
  return DLPACK_FLAG_BITMASK_READ_ONLY | DLPACK_FLAG_BITMASK_IS_COPIED |
         (DLPACK_MINOR_VERSION >= 1 ? kSubBytePaddedFlag : 0);
}

std::uint8_t build_last_dtype_code() noexcept { return last_dtype_code<DLDataTypeCode>(); }

bool is_packed_sub_byte(DLDataType dtype, std::uint64_t flags) noexcept {
  return packed_sub_byte(dtype, flags);
}

bool known_device_type(std::int32_t type) noexcept {
  // 5 and 6 were never assigned.
  return type >= kDLCPU && type <= last_device_type<DLDeviceType>() && type != 5 && type != 6;
}

LayoutFault check_dtype(DLDataType dtype, std::uint8_t last_code) noexcept {
  return dtype_fault(dtype, last_code);
}

LayoutFault check_layout(std::int32_t ndim, const std::int64_t* shape, const std::int64_t* strides,
                         DLDataType dtype, std::uint64_t flags, std::uint8_t last_code,
                         LayoutFacts& facts, std::int64_t* shape_out,
                         std::int64_t* strides_out) noexcept {
  if (header_facts(ndim, shape, dtype, flags, last_code, facts) != LayoutFault::kNone) {
    return facts.fault;
  }
  const Unit unit(dtype, flags);
  if (extent_facts(ndim, shape, strides, unit, shape_out, strides_out, facts) !=
      LayoutFault::kNone) {
    return facts.fault;
  }
  return stride_facts(ndim, shape, strides, unit, strides_out, facts);
}

LayoutFault check_dl_tensor(const DLTensor& tensor, std::uint64_t flags, LayoutFacts& facts,
                            std::int64_t* shape_out, std::int64_t* strides_out) noexcept {
  // In the documented order, reading nothing after the failed field: the shape and dtype, then
  // the device and data, then the strides (which a producer may leave unset when it fails earlier).
  if (header_facts(tensor.ndim, tensor.shape, tensor.dtype, flags,
                   last_dtype_code<DLDataTypeCode>(), facts) != LayoutFault::kNone) {
    return facts.fault;
  }
  const Unit unit(tensor.dtype, flags);
  if (extent_facts(tensor.ndim, tensor.shape, tensor.strides, unit, shape_out, strides_out,
                   facts) != LayoutFault::kNone) {
    return facts.fault;
  }
  if (!known_device_type(tensor.device.device_type)) {
    return fault_at(facts, LayoutFault::kDeviceType);
  }
  if (tensor.device.device_id < 0) {
    return fault_at(facts, LayoutFault::kDeviceId);
  }
  if (tensor.data == nullptr && facts.size > 0) {
    return fault_at(facts, LayoutFault::kDataNull);
  }
  if (const LayoutFault fault =
          stride_facts(tensor.ndim, tensor.shape, tensor.strides, unit, strides_out, facts);
      fault != LayoutFault::kNone) {
    return fault;
  }
  // byte_offset and the span after the first element fit int64 (both sides are <= INT64_MAX, so
  // the sum fits uint64); the bytes addressed from data lie within the address space.
  const std::uint64_t offset = tensor.byte_offset;
  const auto high = static_cast<std::uint64_t>(facts.span_high);
  if (offset > kByteLimit || offset + high > kByteLimit) {
    return fault_at(facts, LayoutFault::kSpan);
  }
  const auto address = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(tensor.data));
  std::uint64_t first = 0;
  std::uint64_t end = 0;
  if (__builtin_add_overflow(address, offset, &first) ||
      first < static_cast<std::uint64_t>(facts.span_low) ||
      __builtin_add_overflow(first, high, &end)) {
    return fault_at(facts, LayoutFault::kAddress);
  }
  return LayoutFault::kNone;
}

namespace {

// An address as the message names it: 0x and hexadecimal digits.
std::string address_text(const void* address) {
  char text[2 + 2 * sizeof(std::uintptr_t) + 1];
  std::snprintf(text, sizeof(text), "0x%jx",
                static_cast<std::uintmax_t>(reinterpret_cast<std::uintptr_t>(address)));
  return text;
}

}  // namespace

Error unknown_flags_error(std::uint64_t flags, const char* who) {
  char bits[2 + 16 + 1];
  std::snprintf(bits, sizeof(bits), "0x%jx",
                static_cast<std::uintmax_t>(flags & ~known_flag_bits()));
  return invalid(who, std::string("flags has unknown bits ") + bits);
}

Error dtype_error(LayoutFault fault, DLDataType dtype, const char* who) {
  return invalid(who, dtype_words(fault, dtype));
}

Error layout_error(const LayoutFacts& facts, std::int32_t ndim, const std::int64_t* shape,
                   const std::int64_t* strides, DLDataType dtype, const char* who) {
  return invalid(who, layout_words(facts, ndim, shape, strides, dtype));
}

Error dl_tensor_error(const LayoutFacts& facts, const DLTensor& tensor, const char* who) {
  switch (facts.fault) {
    case LayoutFault::kDeviceType:
      return invalid(who, "device.device_type " + std::to_string(tensor.device.device_type) +
                              " is not a known DLDeviceType");
    case LayoutFault::kDeviceId:
      return invalid(
          who, "device.device_id " + std::to_string(tensor.device.device_id) + " is negative");
    case LayoutFault::kDataNull:
      return invalid(who,
                     "data is null for a tensor of " + std::to_string(facts.size) + " elements");
    case LayoutFault::kSpan:
      return invalid(who, "byte_offset " + std::to_string(tensor.byte_offset) +
                              " with the strides' span overflows int64");
    case LayoutFault::kAddress:
      return invalid(who, "data " + address_text(tensor.data) + " with byte_offset " +
                              std::to_string(tensor.byte_offset) + " and the strides' span (" +
                              std::to_string(facts.span_low) + " bytes before the first element, " +
                              std::to_string(facts.span_high) +
                              " from it) leaves the address space");
    default:
      return layout_error(facts, tensor.ndim, tensor.shape, tensor.strides, tensor.dtype, who);
  }
}

expected<void, Error> validate_dtype(DLDataType dtype, const char* who) {
  const LayoutFault fault = dtype_fault(dtype, last_dtype_code<DLDataTypeCode>());
  if (fault != LayoutFault::kNone) {
    return make_unexpected(dtype_error(fault, dtype, who));
  }
  return {};
}

expected<Layout, Error> validate_layout(std::int32_t ndim, const std::int64_t* shape,
                                        DLDataType dtype, std::uint64_t flags, const char* who,
                                        const std::int64_t* strides) {
  LayoutFacts facts;
  if (check_layout(ndim, shape, strides, dtype, flags, last_dtype_code<DLDataTypeCode>(), facts) !=
      LayoutFault::kNone) {
    return make_unexpected(layout_error(facts, ndim, shape, strides, dtype, who));
  }
  return Layout{facts.size, facts.nbytes};
}

expected<Layout, Error> validate_dl_tensor(const DLTensor& tensor, std::uint64_t flags,
                                           const char* who) {
  LayoutFacts facts;
  if (check_dl_tensor(tensor, flags, facts) != LayoutFault::kNone) {
    return make_unexpected(dl_tensor_error(facts, tensor, who));
  }
  return Layout{facts.size, facts.nbytes};
}

std::int64_t element_count(std::int32_t ndim, const std::int64_t* shape) noexcept {
  std::int64_t count = 1;
  bool saturated = false;
  for (std::int32_t i = 0; i < ndim && shape != nullptr; ++i) {
    // A zero extent anywhere makes the count 0, even after the extents before it overflowed.
    const std::int64_t extent = shape[i] > 0 ? shape[i] : 0;
    if (extent == 0) {
      return 0;
    }
    saturated = saturated || __builtin_mul_overflow(count, extent, &count);
  }
  return saturated ? kInt64Max : count;
}

void compact_strides(std::int32_t ndim, const std::int64_t* shape, std::int64_t* strides) noexcept {
  std::int64_t step = 1;
  for (std::int32_t i = ndim; i-- > 0;) {
    strides[i] = step;
    if (__builtin_mul_overflow(step, shape[i] > 0 ? shape[i] : 1, &step)) {
      step = kInt64Max;  // only metadata that the layout rules refuse gets here
    }
  }
}

std::int64_t payload_bytes(std::int64_t size, DLDataType dtype, std::uint64_t flags) noexcept {
  std::int64_t bytes = 0;
  const Unit unit(dtype, flags);
  // Sizes come from element_count(), never negative; a saturated one stays saturated.
  if (size <= 0) {
    return 0;
  }
  return unit.bytes_of(static_cast<std::uint64_t>(size), &bytes) ? bytes : kInt64Max;
}

std::int64_t stride_in_bytes(std::int64_t stride, DLDataType dtype, std::uint64_t flags) noexcept {
  std::int64_t bytes = 0;
  if (Unit(dtype, flags).stride_bytes(stride, &bytes)) {
    return bytes;
  }
  return stride < 0 ? kInt64Min : kInt64Max;
}

}  // namespace holoscan::detail
