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
};

}  // namespace holoscan::detail
