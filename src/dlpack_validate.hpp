#pragma once
// Validation of imported DLPack metadata, and the layout arithmetic shared with the pool.
#include <cstdint>

#include <dlpack/dlpack.h>

#include "holoscan/detail/tensor_context.hpp"
#include "holoscan/expected.hpp"

namespace holoscan::detail {

/** @brief Flag bits this build understands (READ_ONLY, IS_COPIED, and SUBBYTE_PADDED from 1.1). */
std::uint64_t known_flag_bits() noexcept;

/** @brief Checks the dtype: known code, bits and lanes that make sense for it. */
expected<void, Error> validate_dtype(DLDataType dtype, const char* who);

/** @brief Element count and payload bytes of a validated layout. */
struct Layout {
  std::int64_t size = 0;    ///< Number of elements.
  std::int64_t nbytes = 0;  ///< Bytes of the elements' payload.
};

/** @brief Checks ndim, shape, extents and dtype, and that sizes and compact strides fit int64. */
expected<Layout, Error> validate_layout(std::int32_t ndim, const std::int64_t* shape,
                                        DLDataType dtype, std::uint64_t flags, const char* who);

/**
 * @brief Validates `tensor` and fills `context` (dl with owned shape/strides, size, nbytes).
 *
 * Computes compact row-major strides when the producer gave none; never writes to `tensor`.
 */
expected<void, Error> import_dl_tensor(const DLTensor& tensor, std::uint64_t flags,
                                       TensorContext& context, const char* who);

/** @brief Copies a validated `tensor` into `context`, whose dims must be reserved for it. */
void fill_context(const DLTensor& tensor, Layout layout, std::uint64_t flags,
                  TensorContext& context) noexcept;

}  // namespace holoscan::detail
