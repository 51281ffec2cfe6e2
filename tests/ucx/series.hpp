#pragma once
// The tensors the UCX tests send, known to both processes: tensor k (sequence k + 1) has a layout
// picked by k (small, 3-D, large enough for the rendezvous protocol, empty, scalar) and bytes
// that depend on k and their position, so that a byte from another tensor, a stale one or a
// zero never passes the check.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <dlpack/dlpack.h>

#include "holoscan/tensor.hpp"
#include "holoscan/tensor_pool.hpp"

namespace holoscan::test::ucx_series {

/** @brief Layout of one tensor of the series. */
struct Layout {
  DLDataType dtype;                ///< Element type.
  std::vector<std::int64_t> shape;  ///< Extents.
};

/** @brief Bytes of the rendezvous-sized tensor (well above UCX's eager limits). */
inline constexpr std::int64_t kLargeBytes = 300 * 1024 + 3;

/** @brief The layout of tensor `k`. */
inline Layout layout(std::uint64_t k) {
  switch (k % 5) {
    case 0:
      return {{kDLFloat, 32, 1}, {17}};
    case 1:
      return {{kDLInt, 16, 1}, {3, 5, 7}};
    case 2:
      return {{kDLUInt, 8, 1}, {kLargeBytes}};
    case 3:
      return {{kDLFloat, 64, 1}, {0, 4}};
    default:
      return {{kDLInt, 64, 1}, {}};
  }
}

/** @brief Largest payload of the series. */
inline constexpr std::size_t kMaxBytes = static_cast<std::size_t>(kLargeBytes);

/** @brief Byte `j` of tensor `k`: never 0. */
inline std::uint8_t byte_at(std::uint64_t k, std::size_t j) {
  const auto value = static_cast<std::uint8_t>((k * 131 + j * 7 + (j >> 8) * 3 + 1) & 0xff);
  return value == 0 ? 0x5a : value;
}

/** @brief Writes tensor `k`'s bytes into `data` (`bytes` of them). */
inline void fill(std::uint64_t k, void* data, std::size_t bytes) {
  auto* out = static_cast<std::uint8_t*>(data);
  for (std::size_t j = 0; j < bytes; ++j) {
    out[j] = byte_at(k, j);
  }
}

/** @brief Tensor `k` of the series, filled, in a block of `pool`; the pool's refusal if none. */
inline expected<Tensor, Error> pooled(TensorPool& pool, std::uint64_t k) {
  const Layout want = layout(k);
  auto tensor = pool.allocate(want.shape, want.dtype);
  if (tensor) {
    fill(k, tensor->data(), static_cast<std::size_t>(tensor->nbytes()));
  }
  return tensor;
}

/** @brief What is wrong with `tensor` as tensor `k` of the series; empty when nothing is. */
inline std::string check(std::uint64_t k, const Tensor& tensor) {
  const Layout want = layout(k);
  const DLDataType got = tensor.dtype();
  if (got.code != want.dtype.code || got.bits != want.dtype.bits || got.lanes != want.dtype.lanes) {
    return "tensor " + std::to_string(k) + ": wrong dtype";
  }
  if (tensor.shape() != want.shape) {
    return "tensor " + std::to_string(k) + ": wrong shape";
  }
  if (!tensor.is_contiguous()) {
    return "tensor " + std::to_string(k) + ": not contiguous";
  }
  const auto* bytes = static_cast<const std::uint8_t*>(tensor.data());
  for (std::size_t j = 0; j < static_cast<std::size_t>(tensor.nbytes()); ++j) {
    if (bytes[j] != byte_at(k, j)) {
      return "tensor " + std::to_string(k) + ": byte " + std::to_string(j) + " is " +
             std::to_string(bytes[j]) + ", expected " + std::to_string(byte_at(k, j));
    }
  }
  return {};
}

}  // namespace holoscan::test::ucx_series
