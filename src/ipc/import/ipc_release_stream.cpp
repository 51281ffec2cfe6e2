#include "ipc/import/ipc_release_stream.hpp"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

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

// A gone connection's events and a pidfd of its exporter (-1: its exit cannot be known).
struct KeptEvents {
  std::vector<IpcEvent> events;
  ipc::UniqueFd exporter;
};

struct RetiredRings {
  SpinMutex mutex;
  std::vector<KeptEvents> kept;
};

RetiredRings& retired() { return fork_locked<RetiredRings>(); }

[[maybe_unused]] const bool fork_handlers_registered = register_fork_handlers<RetiredRings>();

bool exited(int pidfd) noexcept {
  if (pidfd < 0) {
    return false;
  }
  pollfd process{pidfd, POLLIN, 0};
  return ::poll(&process, 1, 0) == 1 && (process.revents & POLLIN) != 0;
}

void give_back(std::vector<IpcEvent>& events) noexcept {
  for (const IpcEvent& event : events) {
    release_ipc_event(event);
  }
  events.clear();
}

// The index of the event to record next: a new one until the ring is full, then each in turn.
expected<std::size_t, Error> next_event(ReleaseRing& ring, int device) noexcept {
  if (ring.events.size() < kReleaseRingSize) {
    try {
      ring.events.reserve(kReleaseRingSize);
    } catch (...) {
      return tl::unexpected<Error>(
          make_error(ErrorCode::kResourceExhausted, "ipc release: out of host memory"));
    }
    auto event = acquire_ipc_event(device);
    if (!event) {
      return tl::unexpected<Error>(std::move(event.error()));
    }
    ring.events.push_back(*event);
    return ring.events.size() - 1;
  }
  const std::size_t index = ring.next;
  ring.next = (ring.next + 1) % kReleaseRingSize;
  return index;
}

}  // namespace

ReleaseRings::ReleaseRings(int exporter_pidfd) noexcept
    : exporter_pidfd_(exporter_pidfd), owner_(::getpid()) {}

ReleaseRings::~ReleaseRings() {
  if (::getpid() != owner_) {
    return;  // the parent's streams and events: neither CUDA nor the parent's pool is ours here
  }
  const RelaxedCaptureScope relaxed;  // a user's thread: never refused for another's capture
  const bool exporter_gone = exited(exporter_pidfd_);
  for (ReleaseRing& ring : rings_) {
    if (ring.stream != nullptr) {
      (void)cuda_ipc().stream_destroy(ring.stream);  // what is queued there still runs
      ring.stream = nullptr;
    }
    if (ring.events.empty()) {
      continue;
    }
    if (exporter_gone) {
      give_back(ring.events);
      continue;
    }
    RetiredRings& aside = retired();
    std::lock_guard<SpinMutex> lock(aside.mutex);
    try {
      aside.kept.push_back(KeptEvents{std::move(ring.events), ipc::UniqueFd()});
      // Without a copy of the pidfd (none known, or no descriptor left) they stay for good.
      if (exporter_pidfd_ >= 0) {
        aside.kept.back().exporter = ipc::UniqueFd(::fcntl(exporter_pidfd_, F_DUPFD_CLOEXEC, 0));
      }
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
    (void)retire_release_rings();  // a new stream: first give back what gone connections kept
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
  return event.handle;
}

std::size_t retire_release_rings() noexcept {
  RetiredRings& aside = retired();
  std::lock_guard<SpinMutex> lock(aside.mutex);
  for (auto kept = aside.kept.begin(); kept != aside.kept.end();) {
    if (exited(kept->exporter.get())) {
      give_back(kept->events);
      kept = aside.kept.erase(kept);  // closes the pidfd
    } else {
      ++kept;
    }
  }
  return aside.kept.size();
}

void reset_release_streams() noexcept {
  RetiredRings& aside = retired();
  std::lock_guard<SpinMutex> lock(aside.mutex);
  for (KeptEvents& kept : aside.kept) {
    give_back(kept.events);
  }
  aside.kept.clear();
}

}  // namespace holoscan::detail
