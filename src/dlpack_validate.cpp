#include "dlpack_validate.hpp"

#include <climits>
#include <cstdint>
#include <string>
#include <type_traits>

#include "holoscan/tensor.hpp"

namespace holoscan::detail {
namespace {

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

bool known_device_type(std::int32_t type) noexcept {
  // 5 and 6 were never assigned.
  return type >= kDLCPU && type <= last_device_type<DLDeviceType>() && type != 5 && type != 6;
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

// DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED (DLPack 1.1), named here for 1.0 headers too.
constexpr std::uint64_t kSubBytePaddedFlag = std::uint64_t{1} << 2;

Error invalid(const char* who, const std::string& what) {
  return Error{ErrorCode::kInvalidArgument, std::string(who) + ": " + what, 0};
}

std::int64_t payload_bytes(std::int64_t size, DLDataType dtype, std::uint64_t flags,
                           bool* overflow) noexcept {
  const std::int64_t bits = static_cast<std::int64_t>(dtype.bits) * dtype.lanes;
  std::int64_t total = 0;
  if (bits % 8 == 0 || (flags & kSubBytePaddedFlag) != 0) {
    *overflow = __builtin_mul_overflow(size, (bits + 7) / 8, &total);
    return total;
  }
  *overflow = __builtin_mul_overflow(size, bits, &total);
  return (total + 7) / 8;
}

}  // namespace

std::uint64_t known_flag_bits() noexcept {
  std::uint64_t bits = DLPACK_FLAG_BITMASK_READ_ONLY | DLPACK_FLAG_BITMASK_IS_COPIED;
#ifdef DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED
  bits |= DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED;
#endif
  return bits;
}

expected<void, Error> validate_dtype(DLDataType dtype, const char* who) {
  if (dtype.code > last_dtype_code<DLDataTypeCode>()) {
    return tl::unexpected<Error>(invalid(
        who, "dtype.code " + std::to_string(dtype.code) + " is not a known DLDataTypeCode"));
  }
  if (dtype.lanes == 0) {
    return tl::unexpected<Error>(invalid(who, "dtype.lanes is 0"));
  }
  if (dtype.bits == 0) {
    return tl::unexpected<Error>(invalid(who, "dtype.bits is 0"));
  }
  const int sub_byte_bits = required_sub_byte_bits(dtype.code);
  if (sub_byte_bits != 0) {
    if (dtype.bits != sub_byte_bits || dtype.lanes != 1) {
      return tl::unexpected<Error>(invalid(who, "dtype.bits " + std::to_string(dtype.bits) +
                                                    " (lanes " + std::to_string(dtype.lanes) +
                                                    ") does not match dtype.code " +
                                                    std::to_string(dtype.code)));
    }
  } else if (dtype.bits % 8 != 0) {
    return tl::unexpected<Error>(invalid(
        who, "dtype.bits " + std::to_string(dtype.bits) + " is not a whole number of bytes"));
  }
  return {};
}

expected<Layout, Error> validate_layout(std::int32_t ndim, const std::int64_t* shape,
                                        DLDataType dtype, std::uint64_t flags, const char* who) {
  if (ndim < 0 || ndim > kMaxTensorDims) {
    return tl::unexpected<Error>(invalid(who, "ndim " + std::to_string(ndim) + " is outside [0, " +
                                                  std::to_string(kMaxTensorDims) + "]"));
  }
  if (ndim > 0 && shape == nullptr) {
    return tl::unexpected<Error>(
        invalid(who, "shape is null while ndim is " + std::to_string(ndim)));
  }
  if (auto valid = validate_dtype(dtype, who); !valid) {
    return tl::unexpected<Error>(std::move(valid.error()));
  }
  Layout layout;
  layout.size = 1;
  std::int64_t compact_span = 1;  // product of max(extent, 1): the largest computed stride
  for (std::int32_t i = 0; i < ndim; ++i) {
    const std::int64_t extent = shape[i];
    if (extent < 0) {
      return tl::unexpected<Error>(invalid(
          who, "shape[" + std::to_string(i) + "] is " + std::to_string(extent) + ", must be >= 0"));
    }
    if (__builtin_mul_overflow(layout.size, extent, &layout.size) ||
        __builtin_mul_overflow(compact_span, extent > 0 ? extent : 1, &compact_span)) {
      return tl::unexpected<Error>(invalid(who, "shape: element count overflows int64"));
    }
  }
  bool overflow = false;
  layout.nbytes = payload_bytes(layout.size, dtype, flags, &overflow);
  if (overflow) {
    return tl::unexpected<Error>(invalid(who, "shape: byte size overflows int64"));
  }
  return layout;
}

expected<void, Error> import_dl_tensor(const DLTensor& tensor, std::uint64_t flags,
                                       TensorContext& context, const char* who) {
  auto layout = validate_layout(tensor.ndim, tensor.shape, tensor.dtype, flags, who);
  if (!layout) {
    return tl::unexpected<Error>(std::move(layout.error()));
  }
  if (!known_device_type(tensor.device.device_type)) {
    return tl::unexpected<Error>(invalid(who, "device.device_type " +
                                                  std::to_string(tensor.device.device_type) +
                                                  " is not a known DLDeviceType"));
  }
  if (tensor.device.device_id < 0) {
    return tl::unexpected<Error>(invalid(
        who, "device.device_id " + std::to_string(tensor.device.device_id) + " is negative"));
  }
  if (tensor.data == nullptr && layout->size > 0) {
    return tl::unexpected<Error>(
        invalid(who, "data is null for a tensor of " + std::to_string(layout->size) + " elements"));
  }
  std::uintptr_t first = 0;
  if (tensor.byte_offset > static_cast<std::uint64_t>(INT64_MAX) ||
      __builtin_add_overflow(reinterpret_cast<std::uintptr_t>(tensor.data), tensor.byte_offset,
                             &first)) {
    return tl::unexpected<Error>(invalid(
        who, "byte_offset " + std::to_string(tensor.byte_offset) + " overflows the address space"));
  }
  if (tensor.strides != nullptr) {
    // Tensor::strides() reports bytes, so each stride must still fit int64 once scaled.
    const std::int64_t item =
        (static_cast<std::int64_t>(tensor.dtype.bits) * tensor.dtype.lanes + 7) / 8;
    for (std::int32_t i = 0; i < tensor.ndim; ++i) {
      std::int64_t bytes = 0;
      if (tensor.strides[i] == INT64_MIN ||
          __builtin_mul_overflow(tensor.strides[i], item, &bytes)) {
        return tl::unexpected<Error>(invalid(who, "strides[" + std::to_string(i) + "] is " +
                                                      std::to_string(tensor.strides[i]) +
                                                      ", too large to express in bytes"));
      }
    }
  }
  if (!context.reserve_dims(tensor.ndim)) {
    return make_unexpected(ErrorCode::kResourceExhausted,
                           std::string(who) + ": out of host memory");
  }
  fill_context(tensor, *layout, flags, context);
  return {};
}

void fill_context(const DLTensor& tensor, Layout layout, std::uint64_t flags,
                  TensorContext& context) noexcept {
  std::int64_t stride = 1;  // validate_layout proved the compact strides fit
  for (std::int32_t i = tensor.ndim; i-- > 0;) {
    context.dl.shape[i] = tensor.shape[i];
    context.dl.strides[i] = tensor.strides != nullptr ? tensor.strides[i] : stride;
    stride *= tensor.shape[i] > 0 ? tensor.shape[i] : 1;
  }
  context.dl.data = tensor.data;
  context.dl.device = tensor.device;
  context.dl.dtype = tensor.dtype;
  context.dl.byte_offset = tensor.byte_offset;
  context.flags = flags;
  context.size = layout.size;
  context.nbytes = layout.nbytes;
}

}  // namespace holoscan::detail
