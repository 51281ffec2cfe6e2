#pragma once
// The imports an Importer with ReadinessWait::kOnHost holds back until the exporter's readiness
// event has completed, oldest first: receive() hands them out in publish order with the contract
// met, so that no consumer stream ever waits on another process's event (a wait that never ends
// once that process dies, and that holds up the GPU's turns between processes).
#include <atomic>
#include <cstddef>
#include <deque>
#include <optional>

#include "holoscan/expected.hpp"
#include "holoscan/tensor.hpp"

namespace holoscan::ipc::detail {

/** @brief Imports waiting for their readiness, in publish order; used by the receiving thread. */
class UnreadyImports {
 public:
  /** @brief Holds `tensor`, an import of this library, behind those held before; throws
   *         std::bad_alloc (then `tensor` is left to the caller). */
  void hold(Tensor& tensor);
  /**
   * @brief The oldest import once its readiness event has completed (asked without waiting), its
   *        readiness contract met; nullopt while it has not, or when none is held. An event that
   *        cannot be asked (a broken context) would hold it, and all behind it, for ever: that
   *        import is given back and the error (kFailure naming cudaEventQuery) returned.
   */
  expected<std::optional<Tensor>, Error> take_ready() noexcept;
  /** @brief Whether no import is held (the receiving thread). */
  bool empty() const noexcept { return held_.empty(); }
  /** @brief Imports held; any thread may ask. */
  std::size_t size() const noexcept { return count_.load(std::memory_order_relaxed); }
  /**
   * @brief Gives back (no work of this process touched them, so each Release goes without event)
   *        every import held whose readiness event has not completed, asked once each, and keeps
   *        the others in order: for an exporter whose process has exited, whose events that did
   *        not complete never will. Returns how many are kept.
   */
  std::size_t give_back_unready() noexcept;

 private:
  std::deque<Tensor> held_;
  std::atomic<std::size_t> count_{0};  // held_.size(), for other threads
};

/**
 * @brief Whether `tensor`'s readiness event (an import of this library) has completed, asked
 *        without waiting (true without one); once it has, its readiness contract is met for good
 *        (ImportedReference::readiness_passed, whose error this returns). Only for an import no
 *        other thread holds yet.
 */
expected<bool, Error> readiness_passed(Tensor& tensor) noexcept;

}  // namespace holoscan::ipc::detail
