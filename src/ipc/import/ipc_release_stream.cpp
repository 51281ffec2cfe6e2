#include "ipc/import/ipc_release_stream.hpp"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
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
// events[last]'s has: `settled` says since when), and its exporter (a pid in this namespace, 0
// when unknown, and a pidfd shared by the rings kept for that process; null: its exit cannot be
// known).
struct KeptRing {
  std::int32_t exporter_key = 0;
  std::shared_ptr<ipc::UniqueFd> exporter;
  std::vector<IpcEvent> events;
  std::size_t last = 0;
  std::optional<std::chrono::steady_clock::time_point> settled;
};

struct RetiredRings {
  SpinMutex mutex;
  std::vector<KeptRing> kept;
  // kept.size(), read without the lock: a growing ring skips the take-over (a pidfd poll, queries,
  // the lock) while nothing is kept, as in every process whose connections all live.
  std::atomic<std::size_t> count{0};
};

RetiredRings& retired() { return fork_locked<RetiredRings>(); }

[[maybe_unused]] const bool fork_handlers_registered = register_fork_handlers<RetiredRings>();

// How long a gone ring's completion is old before a record that may wait is made on one of its
// events: an exporter polling its claims has seen the completion by then.
constexpr std::chrono::seconds kSettledLongEnough{1};

bool exited(int pidfd) noexcept {
  if (pidfd < 0) {
    return false;
  }
  pollfd process{pidfd, POLLIN, 0};
  return ::poll(&process, 1, 0) == 1 && (process.revents & POLLIN) != 0;
}

bool exited(const std::shared_ptr<ipc::UniqueFd>& pidfd) noexcept {
  return pidfd != nullptr && exited(pidfd->get());
}

// Whether an interprocess event's latest record has completed; anything but success (not ready,
// a broken context) is "not yet", and leaves no error behind for the caller's thread.
bool completed(cudaEvent_t event) noexcept {
  const cudaError_t status = cuda_ipc().event_query(event);
  if (status != cudaSuccess && status != cudaErrorNotReady) {
    (void)cuda().get_last_error();
  }
  return status == cudaSuccess;
}

void give_back(std::vector<IpcEvent>& events) noexcept {
  for (const IpcEvent& event : events) {
    release_ipc_event(event);
  }
  events.clear();
}

// Gives back the events of exporters that have exited; the caller holds the list's lock.
void retire_locked(RetiredRings& aside) noexcept {
  for (auto kept = aside.kept.begin(); kept != aside.kept.end();) {
    if (exited(kept->exporter)) {
      give_back(kept->events);
      kept = aside.kept.erase(kept);  // the last one of its process closes the pidfd
    } else {
      ++kept;
    }
  }
  aside.count.store(aside.kept.size(), std::memory_order_relaxed);
}

// A pidfd of the live exporter `key` shared with the rings kept for it, else a copy of `pidfd`
// (an unshared one when the key is unknown); null when its exit cannot be known. The caller holds
// the list's lock and has seen `pidfd`'s process alive: two live processes with one pid here are
// one process.
std::shared_ptr<ipc::UniqueFd> shared_pidfd(const RetiredRings& aside, std::int32_t key,
                                            int pidfd) {
  if (pidfd < 0) {
    return nullptr;
  }
  for (const KeptRing& kept : aside.kept) {
    if (key > 0 && kept.exporter_key == key && kept.exporter != nullptr && !exited(kept.exporter)) {
      return kept.exporter;
    }
  }
  ipc::UniqueFd copy(::fcntl(pidfd, F_DUPFD_CLOEXEC, 0));
  if (!copy.valid()) {
    return nullptr;
  }
  return std::make_shared<ipc::UniqueFd>(std::move(copy));  // closes the copy if this throws
}

// Takes one event of `device` from a gone ring of the live exporter `key` whose records have all
// completed (for `soon_only` a second ago or more); the caller holds the list's lock.
std::optional<IpcEvent> take_one_locked(RetiredRings& aside, int device, std::int32_t key,
                                        bool soon_only) noexcept {
  const auto now = std::chrono::steady_clock::now();
  for (auto kept = aside.kept.begin(); kept != aside.kept.end(); ++kept) {
    if (kept->exporter_key != key || kept->exporter == nullptr || kept->events.empty() ||
        kept->events.front().device != device) {
      continue;
    }
    if (!kept->settled) {
      if (!completed(kept->events[kept->last].event)) {
        continue;
      }
      kept->settled = now;
    }
    if (soon_only && now - *kept->settled < kSettledLongEnough) {
      continue;
    }
    const IpcEvent event = kept->events.back();
    kept->events.pop_back();  // settled: `last` is no longer read
    if (kept->events.empty()) {
      aside.kept.erase(kept);
      aside.count.store(aside.kept.size(), std::memory_order_relaxed);
    }
    return event;
  }
  return std::nullopt;
}

// Whether a record on `ring`'s stream now completes at once: nothing queued there is left to
// run, and every point it is about to wait on has passed.
bool idle(const ReleaseRing& ring, const StreamPointList& points) noexcept {
  if (ring.waits_pending || (!ring.events.empty() && !completed(ring.events[ring.last].event))) {
    return false;
  }
  for (std::size_t i = 0; i < points.size(); ++i) {
    if (!point_completed(points[i])) {
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
  const bool exporter_gone = exited(exporter_pidfd_);
  for (ReleaseRing& ring : rings_) {
    if (ring.events.empty()) {
      continue;
    }
    if (exporter_gone) {
      give_back(ring.events);  // nobody polls them any more
      continue;
    }
    // Settled from now when its last record has completed already (the common case: the last
    // import went once the release thread saw its points pass).
    std::optional<std::chrono::steady_clock::time_point> settled;
    if (!ring.waits_pending && completed(ring.events[ring.last].event)) {
      settled = std::chrono::steady_clock::now();
    }
    try {
      aside.kept.push_back(KeptRing{exporter_key_,
                                    shared_pidfd(aside, exporter_key_, exporter_pidfd_),
                                    std::move(ring.events), ring.last, settled});
      aside.count.store(aside.kept.size(), std::memory_order_relaxed);
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
  std::optional<IpcEvent> taken;
  RetiredRings& aside = retired();
  if (exporter_key_ > 0 && aside.count.load(std::memory_order_relaxed) != 0 &&
      !exited(exporter_pidfd_)) {
    const bool at_once = idle(ring, points);
    std::lock_guard<SpinMutex> lock(aside.mutex);
    retire_locked(aside);
    taken = take_one_locked(aside, device, exporter_key_, /*soon_only=*/!at_once);
  }
  if (!taken) {
    auto event = acquire_ipc_event(device);
    if (!event) {
      return tl::unexpected<Error>(std::move(event.error()));
    }
    taken = *event;
  }
  ring.events.push_back(*taken);  // room reserved when the stream was made
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
      ring.events.reserve(kReleaseRingSize);  // so that growing never allocates
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
  // Chosen before the waits are queued: whether a record would complete at once decides which
  // event a take-over may give.
  auto index = next_event(ring, device, points);
  if (!index) {
    return tl::unexpected<Error>(std::move(index.error()));
  }
  ring.waits_pending = ring.waits_pending || !points.empty();
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
  ring.waits_pending = false;  // every wait queued so far lies before this record
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
  aside.count.store(0, std::memory_order_relaxed);
}

}  // namespace holoscan::detail
