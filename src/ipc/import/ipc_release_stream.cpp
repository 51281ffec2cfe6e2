#include "ipc/import/ipc_release_stream.hpp"

#include <mutex>
#include <vector>

#include "cuda/cuda_error.hpp"
#include "cuda/device_guard.hpp"
#include "ipc/cuda/cuda_ipc_api.hpp"
#include "ipc/cuda/ipc_event_pool.hpp"
#include "spin_mutex.hpp"
#include "stream/fork_locked.hpp"
#include "stream/pooled_events.hpp"

namespace holoscan::detail {
namespace {

struct DeviceRing {
  cudaStream_t stream = nullptr;
  std::vector<IpcEvent> events;  // grows to kReleaseRingSize, then is reused in turn
  std::size_t next = 0;
};

struct Rings {
  SpinMutex mutex;
  std::array<DeviceRing, kMaxPoolDevices> devices;
};

Rings& rings() { return fork_locked<Rings>(); }

[[maybe_unused]] const bool fork_handlers_registered = register_fork_handlers<Rings>();

expected<IpcEvent, Error> next_event(DeviceRing& ring, int device) noexcept {
  if (ring.events.size() < kReleaseRingSize) {
    try {
      ring.events.reserve(kReleaseRingSize);
    } catch (...) {
      return tl::unexpected<Error>(
          make_error(ErrorCode::kResourceExhausted, "ipc release: out of host memory"));
    }
    auto event = acquire_ipc_event(device);
    if (!event) {
      return event;
    }
    ring.events.push_back(*event);
    return *event;
  }
  const IpcEvent event = ring.events[ring.next];
  ring.next = (ring.next + 1) % kReleaseRingSize;
  return event;
}

}  // namespace

expected<std::array<std::uint8_t, ipc::kIpcHandleBytes>, Error> record_release(
    int device, const StreamPointList& points) noexcept {
  if (device < 0 || device >= kMaxPoolDevices) {
    return tl::unexpected<Error>(
        make_error(ErrorCode::kInvalidArgument, "ipc release: device id is out of range"));
  }
  Rings& all = rings();
  // One release at a time per process: the waits and the record must not interleave with
  // another release's record, or that record would miss these waits.
  std::lock_guard<SpinMutex> lock(all.mutex);
  DeviceRing& ring = all.devices[static_cast<std::size_t>(device)];
  if (ring.stream == nullptr) {
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
  auto event = next_event(ring, device);
  if (!event) {
    return tl::unexpected<Error>(std::move(event.error()));
  }
  if (cudaError_t status = cuda_ipc().event_record(event->event, ring.stream);
      status != cudaSuccess) {
    return tl::unexpected<Error>(cuda_error(status, "cudaEventRecord(release)"));
  }
  return event->handle;
}

void reset_release_streams() noexcept {
  Rings& all = rings();
  std::lock_guard<SpinMutex> lock(all.mutex);
  for (DeviceRing& ring : all.devices) {
    for (const IpcEvent& event : ring.events) {
      release_ipc_event(event);
    }
    ring.events.clear();
    ring.next = 0;
    if (ring.stream != nullptr) {
      (void)cuda_ipc().stream_destroy(ring.stream);
      ring.stream = nullptr;
    }
  }
}

}  // namespace holoscan::detail
