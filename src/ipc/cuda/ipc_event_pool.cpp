#include "ipc/cuda/ipc_event_pool.hpp"

#include <cstring>
#include <mutex>
#include <vector>

#include "cuda/cuda_error.hpp"
#include "cuda/device_guard.hpp"
#include "spin_mutex.hpp"
#include "stream/fork_locked.hpp"
#include "stream/pooled_events.hpp"

namespace holoscan::detail {
namespace {

struct Pools {
  SpinMutex mutex;
  std::array<std::vector<IpcEvent>, kMaxPoolDevices> free;  // capacity >= created: no allocation
  std::array<std::size_t, kMaxPoolDevices> created{};
};

// Leaked (fork_locked): events must never be destroyed after the runtime unloads at exit.
Pools& pools() { return fork_locked<Pools>(); }

[[maybe_unused]] const bool fork_handlers_registered = register_fork_handlers<Pools>();

expected<IpcEvent, Error> create(int device) noexcept {
  IpcEvent created;
  created.device = device;
  DeviceGuard guard(device);
  if (guard.status() != cudaSuccess) {
    return tl::unexpected<Error>(cuda_error(guard.status(), guard.failed_call()));
  }
  if (cudaError_t status = cuda_ipc().event_create_with_flags(
          &created.event, cudaEventInterprocess | cudaEventDisableTiming);
      status != cudaSuccess) {
    return tl::unexpected<Error>(cuda_error(status, "cudaEventCreateWithFlags(interprocess)"));
  }
  cudaIpcEventHandle_t handle{};
  if (cudaError_t status = cuda_ipc().ipc_get_event_handle(&handle, created.event);
      status != cudaSuccess) {
    Error error = cuda_error(status, "cudaIpcGetEventHandle");
    (void)cuda_ipc().event_destroy(created.event);
    return tl::unexpected<Error>(std::move(error));
  }
  std::memcpy(created.handle.data(), &handle, sizeof(handle));
  Pools& all = pools();
  std::lock_guard<SpinMutex> lock(all.mutex);
  try {
    all.free[static_cast<std::size_t>(device)].reserve(all.created[device] + 1);
  } catch (...) {
    (void)cuda_ipc().event_destroy(created.event);
    return tl::unexpected<Error>(
        make_error(ErrorCode::kResourceExhausted, "ipc event pool: out of host memory"));
  }
  ++all.created[static_cast<std::size_t>(device)];
  return created;
}

}  // namespace

expected<IpcEvent, Error> acquire_ipc_event(int device) noexcept {
  if (device < 0 || device >= kMaxPoolDevices) {
    return tl::unexpected<Error>(
        make_error(ErrorCode::kInvalidArgument, "ipc event pool: device id is out of range"));
  }
  {
    Pools& all = pools();
    std::lock_guard<SpinMutex> lock(all.mutex);
    auto& free = all.free[static_cast<std::size_t>(device)];
    if (!free.empty()) {
      IpcEvent event = free.back();
      free.pop_back();
      return event;
    }
  }
  return create(device);
}

void release_ipc_event(const IpcEvent& event) noexcept {
  if (event.event == nullptr || event.device < 0 || event.device >= kMaxPoolDevices) {
    return;
  }
  Pools& all = pools();
  std::lock_guard<SpinMutex> lock(all.mutex);
  all.free[static_cast<std::size_t>(event.device)].push_back(event);  // within reserved capacity
}

std::size_t destroy_free_ipc_events() noexcept {
  Pools& all = pools();
  std::lock_guard<SpinMutex> lock(all.mutex);
  std::size_t held = 0;
  for (std::size_t device = 0; device < all.free.size(); ++device) {
    for (const IpcEvent& event : all.free[device]) {
      (void)cuda_ipc().event_destroy(event.event);
    }
    all.created[device] -= all.free[device].size();
    all.free[device].clear();
    held += all.created[device];
  }
  return held;
}

}  // namespace holoscan::detail
