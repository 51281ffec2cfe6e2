#include "holoscan/stream_tracked_reference.hpp"

#include <new>

#include "dlpack/producer_deleter.hpp"
#include "stream/defer_release.hpp"
#include "stream/stream_point.hpp"
#include "stream/tracked_streams.hpp"
#include "stream/unnested_release.hpp"

namespace holoscan {
namespace {

template <class Managed>
void run_deleter(void* managed) noexcept {
  detail::run_producer_deleter(static_cast<Managed*>(managed));
}

}  // namespace

using detail::tracked_streams;

StreamTrackedReference::StreamTrackedReference() noexcept {
  // Default-initialized, not value-initialized: every member has its initializer, and `()` would
  // first zero the whole state, the points' inline room included (a 376-byte `rep stos` that was
  // a sixth of an import's time).
  new (detail::StreamTrackedAccess::storage(*this)) detail::StreamState;
}

StreamTrackedReference::~StreamTrackedReference() { tracked_streams(*this).~StreamState(); }

void StreamTrackedReference::release_after_finding_no_claim() noexcept {
  // The count was at zero, or below it while other such releases had not yet given back what
  // they took. Judging this release unpaired now would be wrong when a retain and its release
  // land in between: the pair's release then finds the count at zero too. So give back first and
  // decide by a compare-exchange, which never takes the count below zero: every release that
  // found no claim either finds one once the others have given back, or is counted unpaired.
  std::int64_t word = claims_.fetch_add(1, std::memory_order_relaxed) + 1;
  while (static_cast<std::int32_t>(word) > 0) {
    if (claims_.compare_exchange_weak(word, word - 1, std::memory_order_acq_rel,
                                      std::memory_order_relaxed)) {
      return;
    }
  }
  unpaired_.fetch_add(1, std::memory_order_relaxed);
}

bool StreamTrackedReference::set_deallocation_stream(cudaStream_t stream) {
  return tracked_streams(*this).set_deallocation_stream(stream);
}

bool StreamTrackedReference::set_readiness_stream(cudaStream_t stream) {
  return tracked_streams(*this).set_readiness_stream(stream);
}

bool StreamTrackedReference::has_readiness_stream_contract() const noexcept {
  return tracked_streams(*this).has_readiness();
}

cudaStream_t StreamTrackedReference::readiness_stream() const noexcept {
  return tracked_streams(*this).readiness_stream();
}

expected<void, Error> StreamTrackedReference::synchronize_for_consumer(
    cudaStream_t consumer_stream) {
  return tracked_streams(*this).synchronize_for_consumer(consumer_stream);
}

expected<void, Error> StreamTrackedReference::synchronize_for_host() {
  return tracked_streams(*this).synchronize_for_host();
}

std::size_t StreamTrackedReference::deallocation_point_count() const noexcept {
  return tracked_streams(*this).deallocation_point_count();
}

void StreamTrackedReference::release_when_safe(ReleaseFunction release, void* context) noexcept {
  // Both roles are waited for: the consumers' deallocation points, and the producer's readiness
  // point, in case the memory is dropped before anyone consumed it while the producer still writes.
  // The caller never queries them: an event query costs more than the record that made it (about
  // 1.3 us on the H200) and would contend with the caller's next launches for the driver, so the
  // release thread decides, for many releases at once.
  detail::StreamState& streams = tracked_streams(*this);
  // Called as the owner goes (its destructor): no other thread can reach the points any more, so
  // they are taken without the lock (one atomic read-modify-write less per owner's life); the
  // last reference's release (shared_ptr, handle claim) ordered every other thread's writes first.
  if (streams.holds_points_unshared()) {
    detail::StreamPointList points = streams.take_release_points_unshared();
    if (!points.empty()) {
      detail::defer_release(std::move(points), release, context);
      return;
    }
  }
  if (release != nullptr) {
    detail::run_release_unnested(release, context);
  }
}

void StreamTrackedReference::release_managed_when_safe(DLManagedTensorVersioned* managed) noexcept {
  const bool deleter = managed != nullptr && managed->deleter != nullptr;
  release_when_safe(deleter ? &run_deleter<DLManagedTensorVersioned> : nullptr, managed);
}

void StreamTrackedReference::release_managed_when_safe(DLManagedTensor* managed) noexcept {
  const bool deleter = managed != nullptr && managed->deleter != nullptr;
  release_when_safe(deleter ? &run_deleter<DLManagedTensor> : nullptr, managed);
}

}  // namespace holoscan
