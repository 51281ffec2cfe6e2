#pragma once
// One handle claim held by something that is no Tensor (a DLPack export, an export to another
// process, a UCX send), on the memory reference the context had when the claim was taken.
#include <memory>
#include <utility>

#include "dlpack/context_access.hpp"
#include "holoscan/dlpack_context.hpp"
#include "holoscan/tensor_memory_reference.hpp"
#include "stream/reference_holds.hpp"

namespace holoscan::detail {

/**
 * @brief Keeps the memory reference a context had when taken, with one handle claim there, given
 *        back when it goes; and the context too (a name of it, which a pool counts) unless the
 *        library made it and the reference alone keeps its memory (a pool block's reference is a
 *        name as well). An owner that lives by its holds (an import's, a pool block's reference) is
 *        kept by one hold alone.
 *        The reference is kept apart because the context's member is public: a holder may put
 *        another one there, which must neither free the memory held here nor receive this
 *        claim's release.
 */
class HeldClaim {
 public:
  /** @brief Holds nothing. */
  HeldClaim() noexcept = default;
  /** @brief Holds `context`'s memory reference (and, where needed, `context`), and retains one
   *         claim on that reference. */
  explicit HeldClaim(const std::shared_ptr<DLManagedTensorContext>& context) noexcept {
    if (context == nullptr) {
      return;
    }
    // An import's owner and a pool block's reference live by their holds: one keeps the owner and
    // counts as this claim, one atomic.
    // Past the most holds it takes, an export holds it as any other reference.
    if (StreamTrackedReference* held = ContextAccess::memory_held_by_holds(*context);
        held != nullptr && ReferenceHolds::try_hold(*held)) {
      held_ = held;
      return;
    }
    memory_ = context->memory_reference;
    // Not copied where the reference keeps the memory: an atomic pair less per export.
    if (memory_ == nullptr || !ContextAccess::memory_lives_in_reference(*context)) {
      context_ = context;
    }
    if (memory_ != nullptr) {
      memory_->retain_tensor_handle();
    }
  }
  /** @brief Takes `other`'s claim; `other` holds nothing after. */
  HeldClaim(HeldClaim&& other) noexcept
      : context_(std::move(other.context_)),
        memory_(std::move(other.memory_)),
        held_(std::exchange(other.held_, nullptr)) {}
  /** @brief Gives back the claim held, then takes `other`'s. */
  HeldClaim& operator=(HeldClaim&& other) noexcept {
    if (this != &other) {
      release();
      context_ = std::move(other.context_);
      memory_ = std::move(other.memory_);
      held_ = std::exchange(other.held_, nullptr);
    }
    return *this;
  }
  HeldClaim(const HeldClaim&) = delete;
  HeldClaim& operator=(const HeldClaim&) = delete;
  /** @brief Whether a claim (or a context without memory reference) is held. */
  explicit operator bool() const noexcept {
    return held_ != nullptr || memory_ != nullptr || context_ != nullptr;
  }
  /** @brief Gives the claim back to the reference it was taken on. */
  ~HeldClaim() { release(); }

 private:
  void release() noexcept {
    if (held_ != nullptr) {
      ReferenceHolds::drop_hold(*std::exchange(held_, nullptr));  // may dispose of it
    }
    if (memory_ != nullptr) {
      memory_->release_tensor_handle();
    }
  }

  std::shared_ptr<DLManagedTensorContext> context_;
  std::shared_ptr<TensorMemoryReference> memory_;
  StreamTrackedReference* held_ = nullptr;  // a hold of an owner that lives by them
};

}  // namespace holoscan::detail
