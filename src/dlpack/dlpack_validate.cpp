#include "dlpack/dlpack_validate.hpp"

#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include "holoscan/tensor.hpp"

namespace holoscan::detail {
namespace {

__extension__ typedef __int128
    Wide;  // every product of two int64 values fits; sums of 32 of them too
constexpr Wide kInt64Max = std::numeric_limits<std::int64_t>::max();
constexpr Wide kInt64Min = std::numeric_limits<std::int64_t>::min();

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
constexpr int last_dtype_code() {
  if constexpr (HasFloat4Type<E>::value) {
    return static_cast<int>(E::kDLFloat4_e2m1fn);
  } else {
    return static_cast<int>(E::kDLBool);
  }
}

// Bits a sub-byte floating-point code requires, or 0 when the code is byte-sized.
int required_sub_byte_bits(std::uint8_t code) noexcept {
  constexpr int kFirstFloat6 = last_dtype_code<DLDataTypeCode>() - 2;  // e2m3fn, e3m2fn, e2m1fn
  if (!HasFloat4Type<DLDataTypeCode>::value) {
    return 0;
  }
  if (code == last_dtype_code<DLDataTypeCode>()) {
    return 4;
  }
  if (code >= kFirstFloat6) {
    return 6;
  }
  return 0;
}

Error invalid(const char* who, const std::string& what) {
  return Error{ErrorCode::kInvalidArgument, std::string(who) + ": " + what, 0};
}

std::int64_t saturate(Wide value) noexcept {
  if (value > kInt64Max) {
    return std::numeric_limits<std::int64_t>::max();
  }
  if (value < kInt64Min) {
    return std::numeric_limits<std::int64_t>::min();
  }
  return static_cast<std::int64_t>(value);
}

Wide element_bits(DLDataType dtype) noexcept { return Wide{dtype.bits} * dtype.lanes; }

// Bits to whole bytes with shifts: a 128-bit division is a library call, a shift is not. An
// arithmetic right shift rounds toward minus infinity, so it floors negative values too.
Wide bytes_rounded_up(Wide bits) noexcept { return (bits + 7) >> 3; }
Wide bytes_rounded_down(Wide bits) noexcept { return bits >> 3; }

Wide item_bytes(DLDataType dtype) noexcept { return bytes_rounded_up(element_bits(dtype)); }

// Bytes spanned by `elements` consecutive elements, exact for packed sub-byte types.
Wide wide_payload_bytes(Wide elements, DLDataType dtype, std::uint64_t flags) noexcept {
  if (is_packed_sub_byte(dtype, flags)) {
    return bytes_rounded_up(elements * element_bits(dtype));
  }
  return elements * item_bytes(dtype);
}

Wide wide_stride_bytes(Wide stride, DLDataType dtype, std::uint64_t flags) noexcept {
  if (!is_packed_sub_byte(dtype, flags)) {
    return stride * item_bytes(dtype);
  }
  const Wide magnitude = bytes_rounded_up((stride < 0 ? -stride : stride) * element_bits(dtype));
  return stride < 0 ? -magnitude : magnitude;
}

}  // namespace

std::uint64_t known_flag_bits() noexcept {
  return DLPACK_FLAG_BITMASK_READ_ONLY | DLPACK_FLAG_BITMASK_IS_COPIED |
         (DLPACK_MINOR_VERSION >= 1 ? kSubBytePaddedFlag : 0);
}

bool is_packed_sub_byte(DLDataType dtype, std::uint64_t flags) noexcept {
  return element_bits(dtype) % 8 != 0 && (flags & kSubBytePaddedFlag) == 0;
}

bool known_device_type(std::int32_t type) noexcept {
  // 5 and 6 were never assigned.
  return type >= kDLCPU && type <= last_device_type<DLDeviceType>() && type != 5 && type != 6;
}

std::int64_t element_count(std::int32_t ndim, const std::int64_t* shape) noexcept {
  Wide count = 1;
  for (std::int32_t i = 0; i < ndim && shape != nullptr; ++i) {
    count *= shape[i] > 0 ? shape[i] : 0;
    if (count > kInt64Max) {
      return std::numeric_limits<std::int64_t>::max();
    }
  }
  return static_cast<std::int64_t>(count);
}

void compact_strides(std::int32_t ndim, const std::int64_t* shape, std::int64_t* strides) noexcept {
  Wide step = 1;
  for (std::int32_t i = ndim; i-- > 0;) {
    strides[i] = saturate(step);
    step *= shape[i] > 0 ? shape[i] : 1;
    if (step > kInt64Max) {
      step = kInt64Max;  // only metadata that validate_layout rejects gets here
    }
  }
}

std::int64_t payload_bytes(std::int64_t size, DLDataType dtype, std::uint64_t flags) noexcept {
  return saturate(wide_payload_bytes(size, dtype, flags));
}

std::int64_t stride_in_bytes(std::int64_t stride, DLDataType dtype, std::uint64_t flags) noexcept {
  return saturate(wide_stride_bytes(stride, dtype, flags));
}

expected<void, Error> validate_dtype(DLDataType dtype, const char* who) {
  if (dtype.code > last_dtype_code<DLDataTypeCode>()) {
    return make_unexpected(invalid(
        who, "dtype.code " + std::to_string(dtype.code) + " is not a known DLDataTypeCode"));
  }
  if (dtype.lanes == 0) {
    return make_unexpected(invalid(who, "dtype.lanes is 0"));
  }
  if (dtype.bits == 0) {
    return make_unexpected(invalid(who, "dtype.bits is 0"));
  }
  const int sub_byte_bits = required_sub_byte_bits(dtype.code);
  if (sub_byte_bits != 0) {
    if (dtype.bits != sub_byte_bits || dtype.lanes != 1) {
      return make_unexpected(invalid(who, "dtype.bits " + std::to_string(dtype.bits) + " (lanes " +
                                              std::to_string(dtype.lanes) +
                                              ") does not match dtype.code " +
                                              std::to_string(dtype.code)));
    }
  } else if (dtype.bits % 8 != 0) {
    return make_unexpected(invalid(
        who, "dtype.bits " + std::to_string(dtype.bits) + " is not a whole number of bytes"));
  }
  // Tensor::itemsize() is a uint8_t, as Holoscan declares it: a larger item could not be told.
  if (item_bytes(dtype) > std::numeric_limits<std::uint8_t>::max()) {
    return make_unexpected(
        invalid(who, "dtype.bits * dtype.lanes gives an element of " +
                         std::to_string(static_cast<std::int64_t>(item_bytes(dtype))) +
                         " bytes, more than the 255 that Tensor::itemsize() can report"));
  }
  return {};
}

expected<Layout, Error> validate_layout(std::int32_t ndim, const std::int64_t* shape,
                                        DLDataType dtype, std::uint64_t flags, const char* who) {
  if (ndim < 0 || ndim > kMaxTensorDims) {
    return make_unexpected(invalid(who, "ndim " + std::to_string(ndim) + " is outside [0, " +
                                            std::to_string(kMaxTensorDims) + "]"));
  }
  if (ndim > 0 && shape == nullptr) {
    return make_unexpected(invalid(who, "shape is null while ndim is " + std::to_string(ndim)));
  }
  if (auto valid = validate_dtype(dtype, who); !valid) {
    return forward_error(std::move(valid));
  }
  Wide size = 1;
  Wide compact_stride = 1;  // the compact row-major stride of the dimension being looked at
  for (std::int32_t i = ndim; i-- > 0;) {
    const std::int64_t extent = shape[i];
    if (extent < 0) {
      return make_unexpected(invalid(
          who, "shape[" + std::to_string(i) + "] is " + std::to_string(extent) + ", must be >= 0"));
    }
    // Strides are computed for zero-size tensors too, and reported in bytes: each must fit.
    if (wide_stride_bytes(compact_stride, dtype, flags) > kInt64Max) {
      return make_unexpected(invalid(who, "shape: the compact stride of dimension " +
                                              std::to_string(i) +
                                              " overflows int64 in bytes (byte size overflow)"));
    }
    size *= extent;
    compact_stride *= extent > 0 ? extent : 1;
    if (size > kInt64Max || compact_stride > kInt64Max) {
      return make_unexpected(invalid(who, "shape: element count overflows int64"));
    }
  }
  const Wide bytes = wide_payload_bytes(size, dtype, flags);
  if (bytes > kInt64Max) {
    return make_unexpected(invalid(who, "shape: byte size overflows int64"));
  }
  return Layout{static_cast<std::int64_t>(size), static_cast<std::int64_t>(bytes)};
}

expected<Layout, Error> validate_dl_tensor(const DLTensor& tensor, std::uint64_t flags,
                                           const char* who) {
  auto layout = validate_layout(tensor.ndim, tensor.shape, tensor.dtype, flags, who);
  if (!layout) {
    return layout;
  }
  if (!known_device_type(tensor.device.device_type)) {
    return make_unexpected(invalid(who, "device.device_type " +
                                            std::to_string(tensor.device.device_type) +
                                            " is not a known DLDeviceType"));
  }
  if (tensor.device.device_id < 0) {
    return make_unexpected(invalid(
        who, "device.device_id " + std::to_string(tensor.device.device_id) + " is negative"));
  }
  if (tensor.data == nullptr && layout->size > 0) {
    return make_unexpected(
        invalid(who, "data is null for a tensor of " + std::to_string(layout->size) + " elements"));
  }
  // The bits addressed relative to data + byte_offset: [low_bits, high_bits). Counted in bits so
  // that packed sub-byte tensors get the same span with explicit strides as with compact ones
  // (whose bytes validate_layout already proved to fit int64).
  const Wide bits = element_bits(tensor.dtype);
  const bool packed = is_packed_sub_byte(tensor.dtype, flags);
  Wide low_bits = 0;
  Wide high_bits = tensor.strides == nullptr ? Wide{layout->nbytes} * 8 : 0;
  if (tensor.strides != nullptr && layout->size > 0) {
    high_bits = packed ? bits : item_bytes(tensor.dtype) * 8;
  }
  constexpr Wide kReachLimit = Wide{1} << 65;  // past it no span fits int64, exact or not
  for (std::int32_t i = 0; i < tensor.ndim; ++i) {
    const std::int64_t stride = tensor.strides != nullptr ? tensor.strides[i] : 0;
    const Wide bytes = wide_stride_bytes(stride, tensor.dtype, flags);
    if (bytes > kInt64Max || bytes <= kInt64Min) {
      return make_unexpected(invalid(who, "strides[" + std::to_string(i) + "] is " +
                                              std::to_string(stride) +
                                              ", too large to express in bytes"));
    }
    if (tensor.strides != nullptr && layout->size > 0) {
      const Wide steps = tensor.shape[i] - 1;
      if ((bytes < 0 ? -bytes : bytes) * steps > kReachLimit) {
        return make_unexpected(invalid(who, "strides[" + std::to_string(i) + "] with shape[" +
                                                std::to_string(i) +
                                                "]: the addressed span overflows int64"));
      }
      const Wide reach = packed ? Wide{stride} * steps * bits : bytes * steps * 8;
      (reach < 0 ? low_bits : high_bits) += reach;
    }
  }
  // Whole bytes touched: low rounded down, high rounded up.
  const Wide low = bytes_rounded_down(low_bits);
  const Wide high = bytes_rounded_up(high_bits);
  const Wide offset = tensor.byte_offset;
  if (offset > kInt64Max || offset + high > kInt64Max || offset + low < -kInt64Max) {
    return make_unexpected(invalid(who, "byte_offset " + std::to_string(tensor.byte_offset) +
                                            " with the strides' span overflows int64"));
  }
  const Wide address = static_cast<Wide>(reinterpret_cast<std::uintptr_t>(tensor.data));
  if (address + offset + low < 0 ||
      address + offset + high > static_cast<Wide>(std::numeric_limits<std::uintptr_t>::max())) {
    return make_unexpected(invalid(
        who, "byte_offset " + std::to_string(tensor.byte_offset) + " overflows the address space"));
  }
  return layout;
}

}  // namespace holoscan::detail
