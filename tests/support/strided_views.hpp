#pragma once
// Tensors over a host buffer with any strides (negative, zero, overlapping, size-1 dimensions),
// and the compact row-major values a correct copy of each must hold.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "holoscan/tensor.hpp"

namespace holoscan::test {

/** @brief A view of an int32 buffer: extents, element strides, first element. */
struct StridedCase {
  std::string name;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;  ///< Elements; may be negative or zero.
  std::int64_t offset = 0;            ///< Index of the first element in the buffer.
};

/** @brief The cases every copy test runs: contiguous, transposed, reversed, broadcast, padded,
 *         overlapping, size-1 dimensions with odd strides, empty, 0-d, a 5-d permutation. */
const std::vector<StridedCase>& strided_cases();

/** @brief A buffer of `count` distinct values (value i at index i, plus a tag). */
std::vector<std::int32_t> numbered_buffer(std::size_t count);

/** @brief The elements of `view` over `buffer`, compact and row-major. */
std::vector<std::int32_t> gathered(const std::vector<std::int32_t>& buffer,
                                   const StridedCase& view);

/**
 * @brief Imports a read-only tensor of `view` over `buffer` (which must outlive it); the
 *        producer's deleter adds one to `*deleted`.
 */
Tensor import_view(std::vector<std::int32_t>& buffer, const StridedCase& view,
                   std::shared_ptr<int> deleted);

}  // namespace holoscan::test
