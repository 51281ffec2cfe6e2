#pragma once
// Validation of DLPack metadata (imports, pool requests) and the arithmetic every size, stride and
// span of a tensor is computed with, so that each is proven to fit int64 before it is used.
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

/** @brief Whether elements of `dtype` are packed below a byte (4/6-bit types, not padded). */
HOLOSCAN_DLPACK_ABI bool is_packed_sub_byte(DLDataType dtype, std::uint64_t flags) noexcept;

/** @brief Whether `type` is a DLDeviceType this build knows. */
HOLOSCAN_DLPACK_ABI bool known_device_type(std::int32_t type) noexcept;

/** @brief Checks the dtype: known code, bits and lanes that make sense for it, item <= 255 B. */
expected<void, Error> validate_dtype(DLDataType dtype, const char* who);

/** @brief Element count and payload bytes of a validated layout. */
struct HOLOSCAN_DLPACK_ABI Layout {
  std::int64_t size = 0;    ///< Number of elements.
  std::int64_t nbytes = 0;  ///< Bytes of the elements' payload.
};

/**
 * @brief Checks ndim, shape, extents and dtype, and that the element count, the payload bytes and
 *        the compact row-major strides in bytes all fit int64.
 */
HOLOSCAN_DLPACK_WING_API expected<Layout, Error> validate_layout(std::int32_t ndim,
                                                                 const std::int64_t* shape,
                                                                 DLDataType dtype,
                                                                 std::uint64_t flags,
                                                                 const char* who);

/**
 * @brief validate_layout plus device, data, explicit strides (in bytes), and the span addressed
 *        from data: byte_offset plus every reachable element stays within int64 and the address
 *        space. Reads the DLTensor's fields only.
 */
HOLOSCAN_DLPACK_WING_API expected<Layout, Error> validate_dl_tensor(const DLTensor& tensor,
                                                                    std::uint64_t flags,
                                                                    const char* who);

/** @brief Number of elements of `ndim` extents; saturates at INT64_MAX instead of overflowing. */
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
