#pragma once
// What a DLManagedTensorContext keeps privately: its access authority, read and narrowed by the
// library (imports narrow it to read-only for good; a pool gives its block's context writer
// authority back when it hands the block out anew), and the mark of a view the library checked,
// which lets an export skip the checks while nothing in the view has changed.
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "holoscan/dlpack_context.hpp"
#include "holoscan/tensor.hpp"  // kMaxTensorDims

namespace holoscan::detail {

namespace fingerprint {

// An odd 64-bit weight per position (splitmix64 of the position, low bit set).
constexpr std::uint64_t weight(std::uint64_t position) noexcept {
  std::uint64_t x = position + 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return (x ^ (x >> 31)) | 1U;
}

// The weights of every extent (even positions) and stride (odd positions), computed once.
struct Weights {
  std::uint64_t value[2 * kMaxTensorDims];
};
constexpr Weights make_weights() noexcept {
  Weights weights{};
  for (std::uint64_t i = 0; i < 2 * kMaxTensorDims; ++i) {
    weights.value[i] = weight(i);
  }
  return weights;
}
inline constexpr Weights kWeights = make_weights();

}  // namespace fingerprint

/**
 * @brief Adds extent and stride `index` (< kMaxTensorDims) to a fingerprint of a view's values: a
 *        weighted sum with an odd weight per position, so that changing any one value always
 *        changes the sum. Cheap enough for every export (two multiplies per dimension).
 */
inline std::uint64_t add_to_fingerprint(std::uint64_t sum, std::int32_t index,
                                        std::int64_t extent, std::int64_t stride) noexcept {
  const auto position = 2 * static_cast<std::size_t>(index);
  return sum + static_cast<std::uint64_t>(extent) * fingerprint::kWeights.value[position] +
         static_cast<std::uint64_t>(stride) * fingerprint::kWeights.value[position + 1];
}

/** @brief Read and narrow the access authority of a context; mark the views it checked. */
struct HOLOSCAN_DLPACK_ABI ContextAccess {
  /** @brief Whether the context's memory may only be read through it. */
  static bool read_only(const DLManagedTensorContext& context) noexcept {
    return context.read_only_.load(std::memory_order_acquire);
  }
  /** @brief Narrows the context to read-only authority (imports); never widened again. */
  static void narrow_to_read_only(DLManagedTensorContext& context) noexcept {
    context.read_only_.store(true, std::memory_order_release);
  }
  /** @brief Gives a context that a pool hands out anew its writer authority back. */
  static void restore_writable(DLManagedTensorContext& context) noexcept {
    context.read_only_.store(false, std::memory_order_release);
  }
  /**
   * @brief Records that the view met the layout rules, with a fingerprint of what was checked:
   *        ndim, dtype, flags, and every extent and stride. The view must point at the context's
   *        own vectors (assign_view() leaves it so).
   */
  static void mark_checked(DLManagedTensorContext& context) noexcept {
    const DLTensor& view = context.tensor.dl_tensor;
    std::uint64_t values = 0;
    for (std::int32_t i = 0; i < view.ndim; ++i) {
      values = add_to_fingerprint(values, i, view.shape[i], view.strides[i]);
    }
    context.checked_stamp_ = stamp_of(context.tensor, values);
  }
  /** @brief Forgets mark_checked(), for a context about to be reused. */
  static void forget_checked(DLManagedTensorContext& context) noexcept {
    context.checked_stamp_ = 0;
  }
  /**
   * @brief Whether mark_checked() recorded this view with these values: its header and
   *        `values_fingerprint` (of its extents and strides, summed by the caller while it copied
   *        them out of the context's own vectors) give the recorded stamp. Any one value written
   *        in place since changes the fingerprint; the caller then checks the view again.
   */
  static bool stamp_matches(const DLManagedTensorContext& context,
                            std::uint64_t values_fingerprint) noexcept {
    return context.checked_stamp_ != 0 &&
           context.checked_stamp_ == stamp_of(context.tensor, values_fingerprint);
  }

 private:
  // ndim, dtype and flags mixed with the values' fingerprint; odd, so never 0 (0: no mark).
  static std::uint64_t stamp_of(const DLManagedTensorVersioned& managed,
                                std::uint64_t values) noexcept {
    const DLTensor& t = managed.dl_tensor;
    const auto ndim = static_cast<std::uint64_t>(static_cast<std::uint32_t>(t.ndim) & 0xffU);
    const std::uint64_t header = ndim << 48 | (managed.flags & 0xffffU) << 32 |
                                 std::uint64_t{t.dtype.code} << 24 |
                                 std::uint64_t{t.dtype.bits} << 16 | t.dtype.lanes;
    return ((header ^ values) * 0x9e3779b97f4a7c15ULL) | 1U;
  }
};

}  // namespace holoscan::detail
