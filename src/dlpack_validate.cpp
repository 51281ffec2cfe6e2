#include "dlpack_validate.hpp"

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

expected<void, Error> import_dl_tensor(const DLTensor& tensor, std::uint64_t flags,
                                       TensorContext& context, const char* who) {
  if (tensor.ndim < 0 || tensor.ndim > kMaxTensorDims) {
    return tl::unexpected<Error>(invalid(who, "ndim " + std::to_string(tensor.ndim) +
                                                  " is outside [0, " +
                                                  std::to_string(kMaxTensorDims) + "]"));
  }
  if (tensor.ndim > 0 && tensor.shape == nullptr) {
    return tl::unexpected<Error>(
        invalid(who, "shape is null while ndim is " + std::to_string(tensor.ndim)));
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
  if (auto dtype = validate_dtype(tensor.dtype, who); !dtype) {
    return dtype;
  }
  if (!context.reserve_dims(tensor.ndim)) {
    return make_unexpected(ErrorCode::kResourceExhausted,
                           std::string(who) + ": out of host memory");
  }

  std::int64_t size = 1;
  for (std::int32_t i = 0; i < tensor.ndim; ++i) {
    const std::int64_t extent = tensor.shape[i];
    if (extent < 0) {
      return tl::unexpected<Error>(invalid(
          who, "shape[" + std::to_string(i) + "] is " + std::to_string(extent) + ", must be >= 0"));
    }
    if (__builtin_mul_overflow(size, extent, &size)) {
      return tl::unexpected<Error>(invalid(who, "shape: element count overflows int64"));
    }
    context.dl.shape[i] = extent;
  }
  bool overflow = false;
  const std::int64_t nbytes = payload_bytes(size, tensor.dtype, flags, &overflow);
  if (overflow) {
    return tl::unexpected<Error>(invalid(who, "shape: byte size overflows int64"));
  }
  if (tensor.data == nullptr && size > 0) {
    return tl::unexpected<Error>(
        invalid(who, "data is null for a tensor of " + std::to_string(size) + " elements"));
  }
  if (tensor.strides != nullptr) {
    for (std::int32_t i = 0; i < tensor.ndim; ++i) {
      context.dl.strides[i] = tensor.strides[i];
    }
  } else {
    std::int64_t stride = 1;
    for (std::int32_t i = tensor.ndim; i-- > 0;) {
      context.dl.strides[i] = stride;
      stride *= tensor.shape[i] > 0 ? tensor.shape[i] : 1;  // cannot overflow: bounded by size
    }
  }
  context.dl.data = tensor.data;
  context.dl.device = tensor.device;
  context.dl.dtype = tensor.dtype;
  context.dl.byte_offset = tensor.byte_offset;
  context.flags = flags;
  context.size = size;
  context.nbytes = nbytes;
  return {};
}

expected<void, Error> layout_compact(void* data, DLDevice device, const std::int64_t* shape,
                                     std::int32_t ndim, DLDataType dtype, TensorContext& context,
                                     const char* who) {
  DLTensor tensor{};
  tensor.data = data;
  tensor.device = device;
  tensor.ndim = ndim;
  tensor.dtype = dtype;
  tensor.shape = const_cast<std::int64_t*>(shape);  // read only: DLTensor has no const view
  return import_dl_tensor(tensor, 0, context, who);
}

}  // namespace holoscan::detail
