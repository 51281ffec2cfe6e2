#pragma once
/**
 * @file
 * @brief The shared state behind Tensor handles: DLPack metadata, owned dims, the memory.
 */
#include <array>
#include <cstdint>
#include <memory>
#include <new>

#include <dlpack/dlpack.h>

#include "holoscan/tensor_memory_reference.hpp"

namespace holoscan::detail {

/**
 * @brief Metadata of one tensor view over a TensorMemoryReference; shape/strides owned here.
 *
 * Whoever owns the context keeps `memory` alive: an imported context embeds its DLPack owner, a
 * pool's block context lives inside the pool. Tensors hold the context, never `memory` alone.
 */
struct TensorContext {
  /** @brief Dimensions whose shape and strides live inline, without a heap allocation. */
  static constexpr std::int32_t kInlineDims = 6;

  TensorContext() = default;
  TensorContext(const TensorContext&) = delete;  // dl.shape and dl.strides point into this
  TensorContext& operator=(const TensorContext&) = delete;

  /** @brief Points dl.shape/dl.strides at storage for `ndim` dims; false if the heap refused. */
  bool reserve_dims(std::int32_t ndim) noexcept {
    std::int64_t* storage = inline_dims.data();
    if (ndim > kInlineDims) {
      if (heap_dims_capacity < ndim) {
        heap_dims.reset(new (std::nothrow) std::int64_t[2 * static_cast<std::size_t>(ndim)]);
        heap_dims_capacity = heap_dims ? ndim : 0;
        if (!heap_dims) {
          return false;
        }
      }
      storage = heap_dims.get();
    }
    dl.ndim = ndim;
    dl.shape = ndim > 0 ? storage : nullptr;
    dl.strides = ndim > 0 ? storage + ndim : nullptr;
    return true;
  }

  DLTensor dl{};                            ///< Strides in elements, never null for ndim > 0.
  std::uint64_t flags = 0;                  ///< DLPACK_FLAG_BITMASK_* bits kept from import.
  DLPackVersion version{};                  ///< Version of the import ({0, 0} for legacy).
  std::int64_t size = 0;                    ///< Number of elements.
  std::int64_t nbytes = 0;                  ///< Bytes spanned by the elements' payload.
  TensorMemoryReference* memory = nullptr;  ///< Owner of the memory; lives as long as this context.
  std::array<std::int64_t, 2 * kInlineDims> inline_dims{};  ///< Shape, then strides, inline.
  std::unique_ptr<std::int64_t[]> heap_dims;  ///< Shape, then strides, when ndim > kInlineDims.
  std::int32_t heap_dims_capacity = 0;        ///< Dims that heap_dims has room for.
};

}  // namespace holoscan::detail
