#pragma once
// One handle claim held by something that is no Tensor (a DLPack export, an export to another
// process), on the memory reference the context had when the claim was taken.
#include <memory>
#include <utility>

#include "holoscan/dlpack_context.hpp"
#include "holoscan/tensor_memory_reference.hpp"

namespace holoscan::detail {

/**
 * @brief Keeps a context (a name of it, which a pool counts) and the memory reference it had when
 *        taken, with one handle claim there, given back when it goes. The reference is kept apart
 *        because the context's member is public: a holder may put another one there, which must
 *        neither free the memory held here nor receive this claim's release.
 */
class HeldClaim {
 public:
  /** @brief Holds nothing. */
  HeldClaim() noexcept = default;
  /** @brief Holds `context` and its memory reference, and retains one claim on that reference. */
  explicit HeldClaim(std::shared_ptr<DLManagedTensorContext> context) noexcept
      : context_(std::move(context)),
        memory_(context_ != nullptr ? context_->memory_reference : nullptr) {
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
