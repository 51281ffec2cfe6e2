#pragma once
/**
 * @file
 * @brief Holoscan's DLPack helpers: version constants, metadata copies, item sizes, strides and
 *        NumPy type strings. Fallible helpers return `expected` instead of throwing.
 */
#include <cstdint>
#include <string_view>
#include <vector>

#include <dlpack/dlpack.h>

#include "holoscan/dlpack_context.hpp"
#include "holoscan/expected.hpp"
#include "holoscan/export.hpp"

namespace holoscan {

/** @brief DLPack major version this build reads and writes (that of its dlpack.h). */
constexpr std::uint32_t HOLOSCAN_DLPACK_IMPL_VERSION_MAJOR = DLPACK_MAJOR_VERSION;
/** @brief DLPack minor version this build reads and writes (that of its dlpack.h). */
constexpr std::uint32_t HOLOSCAN_DLPACK_IMPL_VERSION_MINOR = DLPACK_MINOR_VERSION;

/** @brief Options of copy_dl_tensor_with_owned_metadata. */
struct HOLOSCAN_DLPACK_API DLPackMetadataCopyOptions {
  /** @brief Write compact row-major element strides when the source has none (null strides). */
  bool materialize_implicit_strides = false;
};

/**
 * @brief Copies `source` into `destination`, whose shape and strides then point into
 *        `owned_shape` and `owned_strides` (elements); null source strides stay null unless
 *        `options` asks for them to be written out.
 */
HOLOSCAN_DLPACK_API void copy_dl_tensor_with_owned_metadata(
    const DLTensor& source, DLTensor& destination, std::vector<std::int64_t>& owned_shape,
    std::vector<std::int64_t>& owned_strides, DLPackMetadataCopyOptions options = {});

/**
 * @brief Points `context`'s view at a copy of `source` with the shape and strides in the
 *        context's own vectors (as the overload above), and stamps the view as this build's
 *        DLPack version with no flags, no manager context and no deleter (the context's memory
 *        reference owns the memory).
 */
HOLOSCAN_DLPACK_API void copy_dl_tensor_with_owned_metadata(DLManagedTensorContext& context,
                                                            const DLTensor& source,
                                                            DLPackMetadataCopyOptions options = {});

/**
 * @brief As above for a DLPack >= 1.0 tensor: the view also takes `source`'s version and flags;
 *        its manager context and deleter are not copied (they stay `source`'s).
 */
HOLOSCAN_DLPACK_API void copy_dl_tensor_with_owned_metadata(DLManagedTensorContext& context,
                                                            const DLManagedTensorVersioned& source,
                                                            DLPackMetadataCopyOptions options = {});

/** @brief Whether a tensor of `version` must carry explicit strides when ndim != 0 (>= 1.2). */
HOLOSCAN_DLPACK_API bool dlpack_version_requires_explicit_strides(DLPackVersion version) noexcept;

/**
 * @brief Bytes of one element: ceil(bits * lanes / 8). Vector lanes count as one element; a
 *        packed sub-byte element reports the whole byte it starts in.
 */
HOLOSCAN_DLPACK_API std::uint64_t dlpack_dtype_item_size_bytes(DLDataType dtype) noexcept;

/**
 * @brief Resizes `strides` to tensor.ndim and fills it with the tensor's strides (compact
 *        row-major when tensor.strides is null), in bytes (element strides times
 *        dlpack_dtype_item_size_bytes), or in elements when `to_num_elements` is true; leaves
 *        it empty when both tensor.strides and tensor.shape are null, as Holoscan 5.0 does.
 */
HOLOSCAN_DLPACK_API void calc_strides(const DLTensor& tensor, std::vector<std::int64_t>& strides,
                                      bool to_num_elements = false);

/**
 * @brief The DLDevice that owns `ptr` per cudaPointerGetAttributes: kDLCUDA (device memory),
 *        kDLCUDAHost (pinned), kDLCUDAManaged, or kDLCPU for memory CUDA does not know (also
 *        when there is no CUDA driver); kFailure when the query fails otherwise.
 */
HOLOSCAN_DLPACK_API expected<DLDevice, Error> dldevice_from_pointer(void* ptr);

/**
 * @brief The DLDataType of a NumPy array-interface type string ("<f4", "|u1", "<c8", "|b1",
 *        "<f2", ...); kInvalidArgument, led by Holoscan 5.0's sentence, for any '>' type, a
 *        missing itemsize and unknown kinds or sizes ("|b1" is ours: 5.0 refuses bool).
 */
HOLOSCAN_DLPACK_API expected<DLDataType, Error> dldatatype_from_typestr(std::string_view typestr);

/**
 * @brief The NumPy array-interface type string of one lane of `dtype` (little-endian, e.g. "<f4",
 *        "|b1"): `lanes` is not read, as in Holoscan 5.0 ({kDLFloat, 32, 4} gives "<f4").
 *        kInvalidArgument for types NumPy cannot describe (bfloat16, float8, ...). "|b1" for
 *        kDLBool is this library's (5.0 refuses it).
 */
HOLOSCAN_DLPACK_API expected<const char*, Error> numpy_dtype(DLDataType dtype);

}  // namespace holoscan
