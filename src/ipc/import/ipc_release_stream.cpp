#include "ipc/import/ipc_release_stream.hpp"

#include <unistd.h>

#include <mutex>
#include <utility>
#include <vector>

#include "cuda/cuda_error.hpp"
#include "cuda/device_guard.hpp"
#include "ipc/cuda/cuda_ipc_api.hpp"
#include "stream/fork_locked.hpp"

namespace holoscan::detail {
namespace {

// The rings of gone connections whose releases had not all completed: their events may not be
// recorded anywhere else before they have (an exporter polling one would see the new record).
struct RetiredRings {
  SpinMutex mutex;
  std::vector<ReleaseRing> rings;
};

RetiredRings& retired() { return fork_locked<RetiredRings>(); }

[[maybe_unused]] const bool fork_handlers_registered = register_fork_handlers<RetiredRings>();

void give_back(ReleaseRing& ring) noexcept {
  for (const IpcEvent& event : ring.events) {
    release_ipc_event(event);
  }
  ring.events.clear();
  if (ring.stream != nullptr) {
    (void)cuda_ipc().stream_destroy(ring.stream);  // nothing pending: completed, or a test's reset
    ring.stream = nullptr;
  }
}

// Gives `ring` back when every release recorded on it has completed. The last event recorded is
// the last work of the stream, so its completion is the ring's. Anything but success (not ready, a
// broken context) keeps the ring: its events are never reused while their state is unknown.
bool give_back_if_done(ReleaseRing& ring) noexcept {
  if (!ring.events.empty() && cuda_ipc().event_query(ring.events[ring.last].event) != cudaSuccess) {
    return false;
  }
  give_back(ring);
  return true;
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
    ring.events.push_back(*event);  // never recorded until it is: complete, as CUDA has it
    return ring.events.size() - 1;
  }
  const std::size_t index = ring.next;
  ring.next = (ring.next + 1) % kReleaseRingSize;
  return index;
}

}  // namespace

ReleaseRings::ReleaseRings() noexcept : owner_(::getpid()) {}

ReleaseRings::~ReleaseRings() {
  if (::getpid() != owner_) {
    return;  // the parent's streams and events: neither CUDA nor the parent's pool is ours here
  }
  for (ReleaseRing& ring : rings_) {
    if (ring.stream == nullptr || give_back_if_done(ring)) {
      continue;
    }
    RetiredRings& aside = retired();
    std::lock_guard<SpinMutex> lock(aside.mutex);
    try {
      aside.rings.push_back(std::move(ring));
    } catch (...) {
      // No room to keep it aside: its stream and events are left as they are (never reused),
      // which is safe; only they are lost.
    }
  }
}

expected<std::array<std::uint8_t, ipc::kIpcHandleBytes>, Error> ReleaseRings::record(
    int device, const StreamPointList& points) noexcept {
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
  ring.last = *index;  // only a record made: a failed one left the event's earlier record
  return event.handle;
}

std::size_t retire_release_rings() noexcept {
  RetiredRings& aside = retired();
  std::lock_guard<SpinMutex> lock(aside.mutex);
  for (auto ring = aside.rings.begin(); ring != aside.rings.end();) {
    ring = give_back_if_done(*ring) ? aside.rings.erase(ring) : ring + 1;
  }
  return aside.rings.size();
}

void reset_release_streams() noexcept {
  RetiredRings& aside = retired();
  std::lock_guard<SpinMutex> lock(aside.mutex);
  for (ReleaseRing& ring : aside.rings) {
    give_back(ring);
  }
  aside.rings.clear();
}

}  // namespace holoscan::detail
