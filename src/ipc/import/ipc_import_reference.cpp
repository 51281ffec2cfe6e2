#include "ipc/import/ipc_import_reference.hpp"

#include <unistd.h>

#include <array>
#include <cstdint>
#include <memory>
#include <new>
#include <optional>
#include <utility>

#include "cuda/cuda_error.hpp"
#include "ipc/cuda/cuda_ipc_api.hpp"
#include "keep_until_exit.hpp"
#include "stream/defer_release.hpp"
#include "stream/stream_point.hpp"
#include "stream/tracked_streams.hpp"

namespace holoscan::ipc::detail {
namespace {

// What an import keeps until the GPU has passed its deallocation points.
struct HeldImport {
  std::shared_ptr<ImporterCore> core;
  std::shared_ptr<ImportedMapping> mapping;
  std::shared_ptr<holoscan::detail::OpenedEvent> readiness;
  std::uint64_t export_id = 0;
  bool release_when_done = false;  // no release event could be recorded: send the Release then
};

void finish(void* context) noexcept {
  std::unique_ptr<HeldImport> held(static_cast<HeldImport*>(context));
  held->mapping.reset();  // unmapped (unless the cache keeps it) before any Release goes
  if (held->release_when_done) {
    held->core->give_back(held->export_id, nullptr, true);
  }
  // The importer's state goes with its last user.
}

}  // namespace

ImportedReference::ImportedReference(std::shared_ptr<ImporterCore> core,
                                     std::shared_ptr<ImportedMapping> mapping,
                                     std::shared_ptr<holoscan::detail::OpenedEvent> readiness,
                                     std::uint64_t export_id, int device) noexcept
    : core_(std::move(core)),
      mapping_(std::move(mapping)),
      readiness_(std::move(readiness)),
      export_id_(export_id),
      device_(device),
      maker_(::getpid()) {}

ImportedReference::~ImportedReference() {
  holoscan::detail::StreamPointList points =
      holoscan::detail::tracked_streams(*this).take_release_points();
  if (::getpid() != maker_) {
    // A forked child's copy: the parent still reads the memory and gives the export back itself,
    // and CUDA cannot be used here. Nothing is recorded, queried or sent; the points' events and
    // the mapping (which unmaps nothing in a child) are left to the child's exit.
    points.clear();
    return;
  }
  if (points.empty()) {
    // No consumer work was recorded: done, no event to wait for. Unmapped (unless the cache
    // keeps it) before the Release goes.
    mapping_.reset();
    core_->give_back(export_id_, nullptr, true);
    return;
  }
  // CUDA calls a free of legacy IPC memory before the importer's cudaIpcCloseMemHandle undefined:
  // a legacy mapping this import alone holds (memory outside a pool, mapped for it) is closed
  // first, once the release thread has seen the points pass, and its Release goes after, without
  // event. Every other Release goes now with one: never asked here whether the points have passed
  // (a query costs more than the wait and the record, and the answer is nearly always "not yet"):
  // the release stream waits on them, the exporter on its event, and the mapping goes once the
  // release thread has seen them pass.
  const bool close_first = mapping_ != nullptr && mapping_->legacy() && mapping_.use_count() == 1;
  std::optional<std::array<std::uint8_t, kIpcHandleBytes>> released;  // the event's handle
  if (!close_first) {
    if (auto recorded = core_->record_release(device_, points)) {
      released = *recorded;
    }
  }
  if (released) {
    core_->give_back(export_id_, &*released, true);
  }
  auto* held = new (std::nothrow)
      HeldImport{core_, std::move(mapping_), std::move(readiness_), export_id_, !released};
  if (held == nullptr) {
    // No room to defer: wait here, the one host block left, rather than unmap under the GPU.
    if (!holoscan::detail::wait_and_drop_points(points)) {
      // A point that never passes here (a record that went into a graph being captured, which
      // may run at any time): the mapping is kept until the process exits and nothing is given
      // back, rather than unmapped under that graph. (Points recorded before a fork() cannot be
      // on this process's own import: maker_.)
      holoscan::detail::keep_until_exit(std::move(mapping_));
      return;
    }
    mapping_.reset();  // still ours (a failed allocation initializes nothing): unmapped first
    if (!released) {
      core_->give_back(export_id_, nullptr, true);
    }
    return;
  }
  holoscan::detail::defer_release(std::move(points), &finish, held);
}

expected<void, Error> ImportedReference::synchronize_for_consumer(cudaStream_t consumer_stream) {
  if (readiness_ == nullptr || readiness_met_) {
    return {};
  }
  const cudaError_t status =
      holoscan::detail::cuda_ipc().stream_wait_event(consumer_stream, readiness_->get(), 0);
  if (status == cudaSuccess) {
    return {};
  }
  Error error = holoscan::detail::cuda_error(status, "cudaStreamWaitEvent");
  if (status == cudaErrorStreamCaptureIsolation || status == cudaErrorStreamCaptureUnsupported) {
    error.message +=
        ": the consumer stream is capturing a CUDA graph; synchronize before the capture begins";
  }
  return make_unexpected(std::move(error));
}

expected<bool, Error> ImportedReference::readiness_passed() noexcept {
  if (readiness_ != nullptr && !readiness_met_) {
    const cudaError_t status = readiness_->query();
    if (status == cudaErrorNotReady) {
      return false;
    }
    if (status != cudaSuccess) {
      return make_unexpected(holoscan::detail::cuda_error(status, "cudaEventQuery(readiness)"));
    }
  }
  // The contract stays (consumer code that always synchronizes keeps working), met for good.
  readiness_met_ = true;
  return true;
}

expected<void, Error> ImportedReference::synchronize_for_host() {
  if (readiness_ == nullptr || readiness_met_) {
    return {};
  }
  const holoscan::detail::RelaxedCaptureScope relaxed;  // never refused for another's capture
  return holoscan::detail::check_cuda(
      holoscan::detail::cuda_ipc().event_synchronize(readiness_->get()), "cudaEventSynchronize");
}

}  // namespace holoscan::ipc::detail
