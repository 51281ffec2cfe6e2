#pragma once
// The one set of layout rules: DLPack import, make_tensor, the pool, exports, the cross-process
// descriptor and the UCX header all check a tensor's metadata here, so that every size, stride
// and span is proven to fit int64 before it is used, with the same verdict and the same words
// everywhere. All arithmetic is 64-bit and overflow-checked (__builtin_*_overflow); nothing here
// allocates until a message is built for a refusal.
#include <cstdint>

#include <dlpack/dlpack.h>

#include "holoscan/expected.hpp"
#include "holoscan/export.hpp"
#include "wing_api.hpp"

namespace holoscan::detail {

/** @brief Flag bits this build understands (READ_ONLY, IS_COPIED, and SUBBYTE_PADDED from 1.1). */
HOLOSCAN_DLPACK_WING_API std::uint64_t known_flag_bits() noexcept;

/** @brief DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED (DLPack 1.1), named for 1.0 headers too. */
inline constexpr std::uint64_t kSubBytePaddedFlag = std::uint64_t{1} << 2;

/** @brief The last DLDataTypeCode of DLPack 1.3 (kDLFloat4_e2m1fn): wire formats speak 1.3. */
inline constexpr std::uint8_t kDLPack13LastDtypeCode = 17;

/** @brief The last DLDataTypeCode of the dlpack.h this build compiles against. */
HOLOSCAN_DLPACK_WING_API std::uint8_t build_last_dtype_code() noexcept;

/** @brief Whether elements of `dtype` are packed below a byte (4/6-bit types, not padded). */
HOLOSCAN_DLPACK_WING_API bool is_packed_sub_byte(DLDataType dtype, std::uint64_t flags) noexcept;

/** @brief Whether `type` is a DLDeviceType this build knows. */
HOLOSCAN_DLPACK_ABI bool known_device_type(std::int32_t type) noexcept;

/** @brief The first rule a tensor breaks, in the order the rules are checked. */
enum class LayoutFault : std::uint8_t {
  kNone,              ///< Every rule holds.
  kNdim,              ///< ndim outside [0, kMaxTensorDims].
  kShapeNull,         ///< No shape for ndim > 0.
  kDtypeCode,         ///< An unknown type code.
  kDtypeLanes,        ///< Zero lanes.
  kDtypeBits,         ///< Zero bits.
  kDtypeSubByte,      ///< Bits or lanes that a 4/6-bit code does not allow.
  kDtypeWholeBytes,   ///< Bits that are not whole bytes for a byte-sized code.
  kDtypePaddedLanes,  ///< IS_SUBBYTE_TYPE_PADDED on a sub-byte code in more than one lane.
  kExtent,            ///< A negative extent (at `index`).
  kCompactStride,     ///< A compact stride that overflows int64 in bytes (at `index`).
  kElementCount,      ///< The element count overflows int64.
  kPayloadBytes,      ///< The payload overflows int64 in bytes.
  kDeviceType,        ///< An unknown device type (DLTensor only).
  kDeviceId,          ///< A negative device id (DLTensor only).
  kDataNull,          ///< No data for a non-empty tensor (DLTensor only).
  kStrideBytes,       ///< An explicit stride that overflows int64 in bytes (at `index`).
  kStrideSpan,        ///< A dimension whose addressed span overflows int64 (at `index`).
  kSpan,              ///< The whole addressed span (plus byte_offset) overflows int64.
  kAddress,           ///< data + byte_offset plus the span wraps the address space (DLTensor only).
};

/** @brief What the rules found: the verdict, and for a valid layout its sizes and span. */
struct HOLOSCAN_DLPACK_ABI LayoutFacts {
  LayoutFault fault = LayoutFault::kNone;  ///< The first rule broken.
  std::int32_t index = 0;                  ///< The dimension of a per-dimension fault.
  std::int64_t size = 0;                   ///< Number of elements.
  std::int64_t nbytes = 0;                 ///< Bytes of the elements' payload.
  std::int64_t span_low = 0;               ///< Bytes addressed before the first element (>= 0).
  std::int64_t span_high = 0;              ///< Bytes addressed from the first element on (>= 0).
};

/** @brief The first dtype rule `dtype` breaks (codes up to `last_code` are known), or kNone. */
HOLOSCAN_DLPACK_WING_API LayoutFault check_dtype(DLDataType dtype, std::uint8_t last_code) noexcept;

/**
 * @brief Checks ndim, shape, dtype and strides (null: compact row-major) in one pass: element
 *        count, payload bytes, every stride in bytes (the compact ones too) and the span that the
 *        strides address each fit int64. Writes what it found to `facts` and returns its fault.
 *        When `shape_out`/`strides_out` are given (room for ndim), they receive the extents and
 *        the element strides (explicit or compact); after a refusal they hold whatever was
 *        written (the caller discards them).
 */
HOLOSCAN_DLPACK_WING_API LayoutFault check_layout(std::int32_t ndim, const std::int64_t* shape,
                                                  const std::int64_t* strides, DLDataType dtype,
                                                  std::uint64_t flags, std::uint8_t last_code,
                                                  LayoutFacts& facts,
                                                  std::int64_t* shape_out = nullptr,
                                                  std::int64_t* strides_out = nullptr) noexcept;

/**
 * @brief check_layout() for a DLTensor (this build's type codes), plus device, data, and
 *        byte_offset plus the span within int64 and the address space. Reads the fields only.
 */
HOLOSCAN_DLPACK_WING_API LayoutFault check_dl_tensor(const DLTensor& tensor, std::uint64_t flags,
                                                     LayoutFacts& facts,
                                                     std::int64_t* shape_out = nullptr,
                                                     std::int64_t* strides_out = nullptr) noexcept;

/** @brief kInvalidArgument naming the dtype field of a check_dtype() refusal; "who: what". */
HOLOSCAN_DLPACK_WING_API Error dtype_error(LayoutFault fault, DLDataType dtype, const char* who);

/** @brief kInvalidArgument naming the field of a check_layout() refusal; "who: what". */
HOLOSCAN_DLPACK_WING_API Error layout_error(const LayoutFacts& facts, std::int32_t ndim,
                                            const std::int64_t* shape, const std::int64_t* strides,
                                            DLDataType dtype, const char* who);

/** @brief kInvalidArgument naming the bits of `flags` this build does not know; "who: what". */
HOLOSCAN_DLPACK_WING_API Error unknown_flags_error(std::uint64_t flags, const char* who);

/** @brief layout_error() for a check_dl_tensor() refusal (device, data, byte_offset too). */
HOLOSCAN_DLPACK_WING_API Error dl_tensor_error(const LayoutFacts& facts, const DLTensor& tensor,
                                               const char* who);

/** @brief Checks the dtype (this build's codes): known code, bits and lanes. */
HOLOSCAN_DLPACK_WING_API expected<void, Error> validate_dtype(DLDataType dtype, const char* who);

/** @brief Element count and payload bytes of a validated layout. */
struct HOLOSCAN_DLPACK_ABI Layout {
  std::int64_t size = 0;    ///< Number of elements.
  std::int64_t nbytes = 0;  ///< Bytes of the elements' payload.
};

/**
 * @brief Checks ndim, shape, extents and dtype, and that the element count, the payload bytes and
 *        the compact row-major strides in bytes all fit int64; with `strides` (elements), also
 *        each of them in bytes and the span they address, as an import checks them.
 */
HOLOSCAN_DLPACK_WING_API expected<Layout, Error> validate_layout(
    std::int32_t ndim, const std::int64_t* shape, DLDataType dtype, std::uint64_t flags,
    const char* who, const std::int64_t* strides = nullptr);

/**
 * @brief validate_layout plus device, data, explicit strides (in bytes), and the span addressed
 *        from data: byte_offset plus every reachable element stays within int64 and the address
 *        space. Reads the DLTensor's fields only.
 */
HOLOSCAN_DLPACK_WING_API expected<Layout, Error> validate_dl_tensor(const DLTensor& tensor,
                                                                    std::uint64_t flags,
                                                                    const char* who);

/** @brief Number of elements of `ndim` extents: 0 with any zero extent, else saturates at
 *         INT64_MAX instead of overflowing. */
HOLOSCAN_DLPACK_ABI std::int64_t element_count(std::int32_t ndim,
                                               const std::int64_t* shape) noexcept;

/** @brief Payload bytes of `size` elements; saturates at INT64_MAX instead of overflowing. */
HOLOSCAN_DLPACK_ABI std::int64_t payload_bytes(std::int64_t size, DLDataType dtype,
                                               std::uint64_t flags) noexcept;

/**
 * @brief A stride in elements as bytes: stride * item bytes, or for packed sub-byte types the
 *        fraction of a byte rounded away from zero; saturates at the int64 limits.
 */
HOLOSCAN_DLPACK_ABI std::int64_t stride_in_bytes(std::int64_t stride, DLDataType dtype,
                                                 std::uint64_t flags) noexcept;

/**
 * @brief Writes compact row-major element strides for `ndim` extents into `strides`; a zero
 *        extent counts as one, so strides of zero-size tensors stay meaningful.
 */
HOLOSCAN_DLPACK_WING_API void compact_strides(std::int32_t ndim, const std::int64_t* shape,
                                              std::int64_t* strides) noexcept;

}  // namespace holoscan::detail
