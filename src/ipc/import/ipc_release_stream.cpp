#include "ipc/import/ipc_release_stream.hpp"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "cuda/cuda_api.hpp"
#include "cuda/cuda_error.hpp"
#include "cuda/device_guard.hpp"
#include "holoscan/ipc/fd.hpp"
#include "ipc/cuda/cuda_ipc_api.hpp"
#include "ipc/transport/ipc_identity.hpp"
#include "stream/fork_locked.hpp"
#include "stream/stream_point.hpp"

namespace holoscan::detail {
namespace {

// A gone connection's ring of one device: its events (every record of theirs completed once
// events[last]'s has), and its exporter (a pid in this namespace, 0 when unknown, and a pidfd
// shared by the rings kept for that process; null: its exit cannot be known).
struct KeptRing {
  std::int32_t exporter_key = 0;
  std::shared_ptr<ipc::UniqueFd> exporter;
  std::vector<IpcEvent> events;
  std::size_t last = 0;
};

struct RetiredRings {
  SpinMutex mutex;
  std::vector<KeptRing> kept;
};

RetiredRings& retired() { return fork_locked<RetiredRings>(); }

[[maybe_unused]] const bool fork_handlers_registered = register_fork_handlers<RetiredRings>();

bool exited(const std::shared_ptr<ipc::UniqueFd>& pidfd) noexcept {
  if (pidfd == nullptr || pidfd->get() < 0) {
    return false;
  }
  pollfd process{pidfd->get(), POLLIN, 0};
  return ::poll(&process, 1, 0) == 1 && (process.revents & POLLIN) != 0;
}

bool completed(cudaEvent_t event) noexcept { return cuda_ipc().event_query(event) == cudaSuccess; }

// Gives back the events of exporters that have exited; the caller holds the list's lock.
void retire_locked(RetiredRings& aside) noexcept {
  for (auto kept = aside.kept.begin(); kept != aside.kept.end();) {
    if (!exited(kept->exporter)) {
      ++kept;
      continue;
    }
    for (const IpcEvent& event : kept->events) {
      release_ipc_event(event);
    }
    kept = aside.kept.erase(kept);  // the last one of its process closes the pidfd
  }
}

// A pidfd of the exporter `key` shared with the rings kept for that live process, else a copy of
// `pidfd`; null when its exit cannot be known. The caller holds the list's lock.
std::shared_ptr<ipc::UniqueFd> shared_pidfd(const RetiredRings& aside, std::int32_t key,
                                            int pidfd) {
  if (key <= 0 || pidfd < 0) {
    return nullptr;
  }
  for (const KeptRing& kept : aside.kept) {
    if (kept.exporter_key == key && kept.exporter != nullptr && !exited(kept.exporter)) {
      return kept.exporter;  // one live process has that pid here: the same one
    }
  }
  ipc::UniqueFd copy(::fcntl(pidfd, F_DUPFD_CLOEXEC, 0));
  if (!copy.valid()) {
    return nullptr;
  }
  return std::make_shared<ipc::UniqueFd>(std::move(copy));  // closes the copy if this throws
}

// Moves into `spare` (room for kReleaseRingSize reserved) the events of gone connections to the
// exporter `key` on `device` whose records have all completed; the caller holds the list's lock.
void take_over_locked(RetiredRings& aside, std::vector<IpcEvent>& spare, int device,
                      std::int32_t key) noexcept {
  if (key <= 0) {
    return;
  }
  for (auto kept = aside.kept.begin(); kept != aside.kept.end();) {
    if (kept->exporter_key != key || kept->exporter == nullptr || kept->events.empty() ||
        kept->events.front().device != device ||
        spare.size() + kept->events.size() > kReleaseRingSize ||
        !completed(kept->events[kept->last].event)) {
      ++kept;
      continue;
    }
    spare.insert(spare.end(), kept->events.begin(), kept->events.end());
    kept = aside.kept.erase(kept);
  }
}

// Whether a record on `ring`'s stream now completes at once: the stream's last record and every
// point it is about to wait on have completed.
bool idle(const ReleaseRing& ring, const StreamPointList& points) noexcept {
  if (!ring.events.empty() && !completed(ring.events[ring.last].event)) {
    return false;
  }
  for (std::size_t i = 0; i < points.size(); ++i) {
    if (cuda().event_query(points[i].event) != cudaSuccess) {
      return false;
    }
  }
  return true;
}

}  // namespace

ReleaseRings::ReleaseRings(int exporter_pidfd) noexcept
    : exporter_pidfd_(exporter_pidfd),
      exporter_key_(std::max(ipc::detail::pidfd_pid(exporter_pidfd), std::int32_t{0})),
      owner_(::getpid()) {}

ReleaseRings::~ReleaseRings() {
  if (::getpid() != owner_) {
    return;  // the parent's streams and events: neither CUDA nor the parent's pool is ours here
  }
  const RelaxedCaptureScope relaxed;  // a user's thread: never refused for another's capture
  for (ReleaseRing& ring : rings_) {
    if (ring.stream != nullptr) {
      (void)cuda_ipc().stream_destroy(ring.stream);  // what is queued there still runs
      ring.stream = nullptr;
    }
  }
  RetiredRings& aside = retired();
  std::lock_guard<SpinMutex> lock(aside.mutex);
  retire_locked(aside);
  for (ReleaseRing& ring : rings_) {
    // The spare events' records have all completed: events[last] stays the ring's last record.
    ring.events.insert(ring.events.end(), ring.spare.begin(), ring.spare.end());
    if (ring.events.empty()) {
      continue;
    }
    try {
      KeptRing kept{exporter_key_, shared_pidfd(aside, exporter_key_, exporter_pidfd_),
                    std::move(ring.events), ring.last};
      if (exited(kept.exporter)) {
        for (const IpcEvent& event : kept.events) {
          release_ipc_event(event);
        }
        continue;
      }
      aside.kept.push_back(std::move(kept));
    } catch (...) {
      // No room to keep them: never reused, which is safe; only they are lost.
    }
  }
}

expected<std::size_t, Error> ReleaseRings::next_event(ReleaseRing& ring, int device,
                                                      const StreamPointList& points) noexcept {
  if (ring.events.size() == kReleaseRingSize) {
    const std::size_t index = ring.next;
    ring.next = (ring.next + 1) % kReleaseRingSize;
    return index;
  }
  if (ring.spare.empty()) {
    RetiredRings& aside = retired();
    std::lock_guard<SpinMutex> lock(aside.mutex);
    retire_locked(aside);
    take_over_locked(aside, ring.spare, device, exporter_key_);
  }
  if (!ring.spare.empty() && idle(ring, points)) {
    ring.events.push_back(ring.spare.back());  // room reserved when the stream was made
    ring.spare.pop_back();
    return ring.events.size() - 1;
  }
  auto event = acquire_ipc_event(device);
  if (!event) {
    return tl::unexpected<Error>(std::move(event.error()));
  }
  ring.events.push_back(*event);
  return ring.events.size() - 1;
}

expected<std::array<std::uint8_t, ipc::kIpcHandleBytes>, Error> ReleaseRings::record(
    int device, const StreamPointList& points) noexcept {
  if (::getpid() != owner_) {
    // A forked child's copy of the connection: CUDA cannot be used here, and the lock may have
    // been copied taken.
    return tl::unexpected<Error>(
        make_error(ErrorCode::kFailure, "ipc release: the connection was made by another process"));
  }
  if (device < 0 || device >= kMaxPoolDevices) {
    return tl::unexpected<Error>(
        make_error(ErrorCode::kInvalidArgument, "ipc release: device id is out of range"));
  }
  std::lock_guard<SpinMutex> lock(mutex_);
  const RelaxedCaptureScope relaxed;  // the queries of a take-over
  ReleaseRing& ring = rings_[static_cast<std::size_t>(device)];
  if (ring.stream == nullptr) {
    try {
      ring.events.reserve(kReleaseRingSize);  // so that growing and taking over never allocate
      ring.spare.reserve(kReleaseRingSize);
    } catch (...) {
      return tl::unexpected<Error>(
          make_error(ErrorCode::kResourceExhausted, "ipc release: out of host memory"));
    }
    // Only making the stream needs its device current: waits and records go to the stream's
    // own device whatever device is current.
    DeviceGuard guard(device);
    if (guard.status() != cudaSuccess) {
      return tl::unexpected<Error>(cuda_error(guard.status(), guard.failed_call()));
    }
    if (cudaError_t status =
            cuda_ipc().stream_create_with_flags(&ring.stream, cudaStreamNonBlocking);
        status != cudaSuccess) {
      ring.stream = nullptr;
      return tl::unexpected<Error>(cuda_error(status, "cudaStreamCreateWithFlags"));
    }
  }
  // Chosen before the waits are queued: a taken-over event is recorded only where the stream is
  // idle and the points have passed.
  auto index = next_event(ring, device, points);
  if (!index) {
    return tl::unexpected<Error>(std::move(index.error()));
  }
  for (std::size_t i = 0; i < points.size(); ++i) {
    if (cudaError_t status = cuda_ipc().stream_wait_event(ring.stream, points[i].event, 0);
        status != cudaSuccess) {
      return tl::unexpected<Error>(cuda_error(status, "cudaStreamWaitEvent"));
    }
  }
  const IpcEvent& event = ring.events[*index];
  if (cudaError_t status = cuda_ipc().event_record(event.event, ring.stream);
      status != cudaSuccess) {
    return tl::unexpected<Error>(cuda_error(status, "cudaEventRecord(release)"));
  }
  ring.last = *index;  // only a record made: a failed one left the event's earlier record
  return event.handle;
}

std::size_t retire_release_rings() noexcept {
  RetiredRings& aside = retired();
  std::lock_guard<SpinMutex> lock(aside.mutex);
  retire_locked(aside);
  return aside.kept.size();
}

void reset_release_streams() noexcept {
  RetiredRings& aside = retired();
  std::lock_guard<SpinMutex> lock(aside.mutex);
  for (KeptRing& kept : aside.kept) {
    for (const IpcEvent& event : kept.events) {
      release_ipc_event(event);
    }
  }
  aside.kept.clear();
}

}  // namespace holoscan::detail
