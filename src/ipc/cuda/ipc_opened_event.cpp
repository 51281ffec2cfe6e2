#include "ipc/cuda/ipc_opened_event.hpp"

#include <unistd.h>

#include <cstring>
#include <iterator>

#include "cuda/cuda_error.hpp"
#include "cuda/device_guard.hpp"
#include "stream/stream_point.hpp"

namespace holoscan::detail {

std::size_t IpcHandleHash::operator()(const IpcHandleBytes& bytes) const noexcept {
  std::uint64_t hash = 0xcbf29ce484222325ull;
  for (std::uint8_t byte : bytes) {
    hash = (hash ^ byte) * 0x100000001b3ull;
  }
  return static_cast<std::size_t>(hash);
}

expected<std::shared_ptr<OpenedEvent>, Error> OpenedEvent::open(const IpcHandleBytes& handle,
                                                                int device) {
  DeviceGuard guard(device);
  if (guard.status() != cudaSuccess) {
    return make_unexpected(cuda_error(guard.status(), guard.failed_call()));
  }
  cudaIpcEventHandle_t ipc_handle{};
  std::memcpy(&ipc_handle, handle.data(), sizeof(ipc_handle));
  cudaEvent_t event = nullptr;
  if (cudaError_t status = cuda_ipc().ipc_open_event_handle(&event, ipc_handle);
      status != cudaSuccess) {
    return make_unexpected(cuda_error(status, "cudaIpcOpenEventHandle"));
  }
  try {
    return std::shared_ptr<OpenedEvent>(new OpenedEvent(event, device));
  } catch (...) {
    (void)cuda_ipc().event_destroy(event);
    return make_unexpected(ErrorCode::kResourceExhausted, "cudaIpcOpenEventHandle: out of memory");
  }
}

OpenedEvent::OpenedEvent(cudaEvent_t event, int device) noexcept
    : event_(event), device_(device), opener_(::getpid()) {}

OpenedEvent::~OpenedEvent() {
  if (::getpid() != opener_) {
    return;  // a forked child's copy (of an Exporter's cache, say): CUDA is unusable there
  }
  if (cuda_ipc().event_destroy(event_) != cudaSuccess) {
    (void)cuda().get_last_error();
  }
}

bool OpenedEvent::completed() const noexcept { return query() == cudaSuccess; }

cudaError_t OpenedEvent::query() const noexcept {
  RelaxedCaptureScope relaxed;
  const cudaError_t status = cuda_ipc().event_query(event_);
  if (status != cudaSuccess && status != cudaErrorNotReady) {
    (void)cuda().get_last_error();
  }
  return status;
}

expected<std::shared_ptr<OpenedEvent>, Error> OpenedEventCache::open(const IpcHandleBytes& handle,
                                                                     int device) {
  if (auto found = events_.find(handle); found != events_.end()) {
    return found->second;
  }
  auto opened = OpenedEvent::open(handle, device);
  if (!opened) {
    return opened;
  }
  if (events_.size() >= kMaxCached) {
    for (auto it = events_.begin(); it != events_.end();) {
      it = it->second.use_count() == 1 ? events_.erase(it) : std::next(it);
    }
  }
  try {
    events_.emplace(handle, *opened);
  } catch (...) {
    // Not cached: this user still gets the event, the next one opens its own.
  }
  return opened;
}

}  // namespace holoscan::detail
