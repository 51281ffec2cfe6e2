#pragma once
// The access authority that a DLManagedTensorContext keeps privately: read and narrowed by the
// library (imports narrow it to read-only for good; a pool gives its block's context writer
// authority back when it hands the block out anew).
#include <atomic>

#include "holoscan/dlpack_context.hpp"

namespace holoscan::detail {

/** @brief Read and narrow the access authority of a context. */
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
   * @brief Records that the view (its ndim, dtype and flags, over the context's own shape and
   *        strides) met the layout rules; the library does so for the contexts it builds.
   */
  static void mark_validated(DLManagedTensorContext& context) noexcept;
  /** @brief Forgets mark_validated(), for a context whose view is about to change. */
  static void forget_validated(DLManagedTensorContext& context) noexcept;
  /**
   * @brief Whether the view is still the one marked: same ndim, dtype and flags, pointing at the
   *        context's own shape and strides of ndim entries. A view built or replaced by hand is
   *        not (its metadata is checked again before it is copied out).
   */
  static bool validated(const DLManagedTensorContext& context) noexcept;
};

}  // namespace holoscan::detail
