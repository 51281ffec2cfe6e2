#pragma once
// The owner of memory handed over with a release function (make_tensor, wrap_memory): it calls
// the function once it is safe, after every deallocation and readiness point, as the DLPack
// owners call their producer's deleter. It lives by its holds (OwnerByHolds): an export keeps it
// with one atomic.
#include "holoscan/export.hpp"
#include "holoscan/make_tensor.hpp"
#include "holoscan/stream_tracked_reference.hpp"

namespace holoscan::detail {

/**
 * @brief Calls `release(data)` exactly once, after the last Tensor and export are gone and the
 *        GPU passed every recorded point (inline, or on the release thread), never under a lock
 *        of the library. A failure the function returns, or an exception it throws, is reported
 *        as a failed DLPack deleter is (stderr, failed_releases()). A null function releases
 *        nothing.
 */
class HOLOSCAN_DLPACK_ABI ReleasedMemory final : public StreamTrackedReference {
 public:
  /** @brief Holds nothing yet (adopt() gives it the memory); built so, it releases nothing. */
  ReleasedMemory() noexcept = default;
  /**
   * @brief Takes `release` for `data`, once; false, `release` untouched and nothing held, when
   *        the heap refuses.
   */
  bool adopt(void* data, TensorMemoryRelease& release) noexcept;
  /** @brief Calls the release once it is safe (now, or from the release thread). */
  ~ReleasedMemory() override;
  ReleasedMemory(const ReleasedMemory&) = delete;
  ReleasedMemory& operator=(const ReleasedMemory&) = delete;

 private:
  struct Pending;
  // On the heap from the start, so that a deferred release needs no allocation in the destructor
  // (which could not report one failing).
  Pending* pending_ = nullptr;
};

}  // namespace holoscan::detail
