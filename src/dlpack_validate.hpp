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

/**
 * @brief Validates `tensor` and fills `context` (dl with owned shape/strides, size, nbytes).
 *
 * Computes compact row-major strides when the producer gave none; never writes to `tensor`.
 */
expected<void, Error> import_dl_tensor(const DLTensor& tensor, std::uint64_t flags,
                                       TensorContext& context, const char* who);

/**
 * @brief Sets `context` to a compact row-major tensor over `data`; validates shape and dtype.
 */
expected<void, Error> layout_compact(void* data, DLDevice device, const std::int64_t* shape,
                                     std::int32_t ndim, DLDataType dtype, TensorContext& context,
                                     const char* who);

}  // namespace holoscan::detail
