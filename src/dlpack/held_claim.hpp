#pragma once
// One handle claim held by something that is no Tensor (a DLPack export, an export to another
// process, a UCX send), on the memory reference the context had when the claim was taken.
#include <memory>
#include <utility>

#include "dlpack/context_access.hpp"
#include "holoscan/dlpack_context.hpp"
#include "holoscan/tensor_memory_reference.hpp"

namespace holoscan::detail {

/**
 * @brief Keeps the memory reference a context had when taken, with one handle claim there, given
 *        back when it goes; and the context too (a name of it, which a pool counts) unless the
 *        library made it and the reference alone keeps its memory (a pool block's reference is a
 *        name as well). The reference is kept apart because the context's member is public: a
 *        holder may put another one there, which must neither free the memory held here nor
 *        receive this claim's release.
 */
class HeldClaim {
 public:
  /** @brief Holds nothing. */
  HeldClaim() noexcept = default;
  /** @brief Holds `context`'s memory reference (and, where needed, `context`), and retains one
   *         claim on that reference. */
  explicit HeldClaim(const std::shared_ptr<DLManagedTensorContext>& context) noexcept
      : memory_(context != nullptr ? context->memory_reference : nullptr) {
    // Not copied where the reference keeps the memory: an atomic pair less per export.
    if (context != nullptr &&
        (memory_ == nullptr || !ContextAccess::memory_lives_in_reference(*context))) {
      context_ = context;
    }
    if (memory_ != nullptr) {
      memory_->retain_tensor_handle();
    }
  }
  /** @brief Takes `other`'s claim; `other` holds nothing after. */
  HeldClaim(HeldClaim&& other) noexcept = default;
  /** @brief Gives back the claim held, then takes `other`'s. */
  HeldClaim& operator=(HeldClaim&& other) noexcept {
    if (this != &other) {
      release();
      context_ = std::move(other.context_);
      memory_ = std::move(other.memory_);
    }
    return *this;
  }
  HeldClaim(const HeldClaim&) = delete;
  HeldClaim& operator=(const HeldClaim&) = delete;
  /** @brief Whether a claim (or a context without memory reference) is held. */
  explicit operator bool() const noexcept { return memory_ != nullptr || context_ != nullptr; }
  /** @brief Gives the claim back to the reference it was taken on. */
  ~HeldClaim() { release(); }

 private:
  void release() noexcept {
    if (memory_ != nullptr) {
      memory_->release_tensor_handle();
    }
  }

  std::shared_ptr<DLManagedTensorContext> context_;
  std::shared_ptr<TensorMemoryReference> memory_;
};

}  // namespace holoscan::detail
