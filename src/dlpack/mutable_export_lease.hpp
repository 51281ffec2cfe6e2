#pragma once
// Holoscan 5.0's exclusive access claim of a DLPack export of a writable Tensor: while such an
// export is alive, another export of its context and mutable_data() are refused.
#include <memory>
#include <utility>

#include "dlpack/context_access.hpp"
#include "holoscan/dlpack_context.hpp"

namespace holoscan::detail {

/**
 * @brief The one mutable export a context allows, held by that export until its deleter runs.
 *        It keeps the context alive: the export's claim may hold the memory alone.
 */
class MutableExportLease {
 public:
  /** @brief Holds no lease. */
  MutableExportLease() noexcept = default;
  /** @brief The lease of `context` (not null), or none when another export holds it. */
  static MutableExportLease take(const std::shared_ptr<DLManagedTensorContext>& context) noexcept {
    MutableExportLease lease;
    if (ContextAccess::begin_mutable_export(*context)) {
      lease.context_ = context;
    }
    return lease;
  }
  /** @brief Takes `other`'s lease; `other` holds none after. */
  MutableExportLease(MutableExportLease&& other) noexcept : context_(std::move(other.context_)) {}
  /** @brief Ends the lease held, then takes `other`'s. */
  MutableExportLease& operator=(MutableExportLease&& other) noexcept {
    if (this != &other) {
      end();
      context_ = std::move(other.context_);
    }
    return *this;
  }
  MutableExportLease(const MutableExportLease&) = delete;
  MutableExportLease& operator=(const MutableExportLease&) = delete;
  /** @brief Ends the lease: the context may be exported and written again. */
  ~MutableExportLease() { end(); }

  /** @brief Whether a lease is held. */
  explicit operator bool() const noexcept { return context_ != nullptr; }

 private:
  void end() noexcept {
    if (context_ != nullptr) {
      ContextAccess::end_mutable_export(*context_);
      context_.reset();
    }
  }

  std::shared_ptr<DLManagedTensorContext> context_;
};

}  // namespace holoscan::detail
