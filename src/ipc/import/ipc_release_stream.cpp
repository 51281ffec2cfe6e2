#include "ipc/import/ipc_release_stream.hpp"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "cuda/cuda_error.hpp"
#include "cuda/device_guard.hpp"
#include "holoscan/ipc/fd.hpp"
#include "ipc/cuda/cuda_ipc_api.hpp"
#include "stream/fork_locked.hpp"
#include "stream/stream_point.hpp"

namespace holoscan::detail {
namespace {

// A gone connection's ring of one device: its events, the one recorded last, and its exporter
// (a pidfd shared by the rings kept for one process; null: its exit cannot be known).
struct KeptRing {
  std::uint32_t exporter_pid = 0;
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

// A pidfd of `exporter_pid` shared with the rings kept for that live process, else a copy of
// `pidfd` (null when there is none or no descriptor is left); the caller holds the list's lock.
std::shared_ptr<ipc::UniqueFd> shared_pidfd(const RetiredRings& aside, std::uint32_t exporter_pid,
                                            int pidfd) {
  for (const KeptRing& kept : aside.kept) {
    if (kept.exporter_pid == exporter_pid && kept.exporter != nullptr && !exited(kept.exporter)) {
      return kept.exporter;  // one live process has that pid: the same one
    }
  }
  if (pidfd < 0) {
    return nullptr;
  }
  auto copy = std::make_shared<ipc::UniqueFd>(::fcntl(pidfd, F_DUPFD_CLOEXEC, 0));
  return copy->get() >= 0 ? copy : nullptr;
}

// Takes into `ring` (new, of `device`) the events of gone connections to `exporter_pid` whose
// last release has completed, up to a whole ring; the caller holds the list's lock.
void take_over_locked(RetiredRings& aside, ReleaseRing& ring, int device,
                      std::uint32_t exporter_pid) noexcept {
  for (auto kept = aside.kept.begin(); kept != aside.kept.end();) {
    const bool fits = ring.events.size() + kept->events.size() <= kReleaseRingSize;
    if (kept->exporter_pid != exporter_pid || kept->events.empty() ||
        kept->events.front().device != device || !fits ||
        cuda_ipc().event_query(kept->events[kept->last].event) != cudaSuccess) {
      ++kept;
      continue;
    }
    ring.events.insert(ring.events.end(), kept->events.begin(), kept->events.end());
    kept = aside.kept.erase(kept);
  }
}

// The index of the event to record next: one taken over or new until the ring is full, then
// each in turn.
expected<std::size_t, Error> next_event(ReleaseRing& ring, int device) noexcept {
  if (ring.recorded < ring.events.size()) {
    return ring.recorded++;
  }
  if (ring.events.size() < kReleaseRingSize) {
    auto event = acquire_ipc_event(device);
    if (!event) {
      return tl::unexpected<Error>(std::move(event.error()));
    }
    ring.events.push_back(*event);  // room reserved when the stream was made
    return ring.recorded++;
  }
  const std::size_t index = ring.next;
  ring.next = (ring.next + 1) % kReleaseRingSize;
  return index;
}

}  // namespace

ReleaseRings::ReleaseRings(int exporter_pidfd, std::uint32_t exporter_pid) noexcept
    : exporter_pidfd_(exporter_pidfd), exporter_pid_(exporter_pid), owner_(::getpid()) {}

ReleaseRings::~ReleaseRings() {
  if (::getpid() != owner_) {
    return;  // the parent's streams and events: neither CUDA nor the parent's pool is ours here
  }
  const RelaxedCaptureScope relaxed;  // a user's thread: never refused for another's capture
  RetiredRings& aside = retired();
  std::lock_guard<SpinMutex> lock(aside.mutex);
  retire_locked(aside);
  for (ReleaseRing& ring : rings_) {
    if (ring.stream != nullptr) {
      (void)cuda_ipc().stream_destroy(ring.stream);  // what is queued there still runs
      ring.stream = nullptr;
    }
    if (ring.events.empty()) {
      continue;
    }
    try {
      KeptRing kept{exporter_pid_, shared_pidfd(aside, exporter_pid_, exporter_pidfd_),
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
  ReleaseRing& ring = rings_[static_cast<std::size_t>(device)];
  if (ring.stream == nullptr) {
    try {
      ring.events.reserve(kReleaseRingSize);  // so that taking over or growing never allocates
    } catch (...) {
      return tl::unexpected<Error>(
          make_error(ErrorCode::kResourceExhausted, "ipc release: out of host memory"));
    }
    {
      const RelaxedCaptureScope relaxed;  // the take-over's queries
      RetiredRings& aside = retired();
      std::lock_guard<SpinMutex> kept_lock(aside.mutex);
      retire_locked(aside);
      take_over_locked(aside, ring, device, exporter_pid_);
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
  for (std::size_t i = 0; i < points.size(); ++i) {
    if (cudaError_t status = cuda_ipc().stream_wait_event(ring.stream, points[i].event, 0);
        status != cudaSuccess) {
      return tl::unexpected<Error>(cuda_error(status, "cudaStreamWaitEvent"));
    }
  }
  auto index = next_event(ring, device);
  if (!index) {
    return tl::unexpected<Error>(std::move(index.error()));
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
