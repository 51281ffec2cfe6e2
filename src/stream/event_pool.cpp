#include "stream/pooled_events.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <mutex>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include <pthread.h>

#include "cuda/cuda_error.hpp"
#include "cuda/device_guard.hpp"
#include "holoscan/event_pool.hpp"
#include "spin_mutex.hpp"
#include "stream/fork_gate.hpp"

namespace holoscan::detail {
namespace {

struct DevicePool {
  SpinMutex mutex;
  std::vector<cudaEvent_t> free_events;  // capacity >= created, so a release never allocates
  std::size_t created = 0;
};

using PoolTable = std::array<std::atomic<DevicePool*>, kMaxPoolDevices>;

// Constant-initialized and trivially destructible, so it needs no one-time set-up that a fork()
// could interrupt (a function-local static's guard, held by a thread that the child does not
// have, hung the child), and it is never destroyed: the pools are leaked on purpose, since they
// must outlive every static destructor that may still return an event, and their events must not
// be destroyed after the runtime unloads.
PoolTable the_pools{};

PoolTable& pools() noexcept { return the_pools; }

// A fork() while another thread (the release thread, say) holds a pool's lock would leave the
// lock held forever in the child: every pool is locked around the fork instead. The pools locked
// are remembered (by the forking thread, which runs all three handlers) so that a pool created
// meanwhile is never unlocked by a handler that did not lock it.
thread_local std::array<DevicePool*, kMaxPoolDevices> pools_locked_for_fork{};

void lock_pools_for_fork() noexcept {
  ForkGate::close();  // no pool is made from here until the fork() is over
  for (std::size_t i = 0; i < pools_locked_for_fork.size(); ++i) {
    DevicePool* pool = pools()[i].load(std::memory_order_acquire);
    if (pool != nullptr) {
      pool->mutex.lock();
    }
    pools_locked_for_fork[i] = pool;
  }
}

void unlock_pools_after_fork() noexcept {
  for (DevicePool*& pool : pools_locked_for_fork) {
    if (pool != nullptr) {
      pool->mutex.unlock();
      pool = nullptr;
    }
  }
}

void unlock_pools_in_parent() noexcept {
  unlock_pools_after_fork();
  ForkGate::open_in_parent();
}

void unlock_pools_in_child() noexcept {
  // Threads that waited for a pool's lock across the fork() are not in the child.
  for (DevicePool* pool : pools_locked_for_fork) {
    if (pool != nullptr) {
      pool->mutex.forget_sleepers_after_fork();
    }
  }
  unlock_pools_after_fork();
  ForkGate::open_in_child();
}

// Registered when the library is loaded, before any thread of the library exists.
[[maybe_unused]] const bool fork_handlers_registered =
    pthread_atfork(lock_pools_for_fork, unlock_pools_in_parent, unlock_pools_in_child) == 0;

// The pool of `device` if it was made already, else null (also for a device out of range).
DevicePool* existing_pool(int device) noexcept {
  return static_cast<unsigned>(device) < static_cast<unsigned>(kMaxPoolDevices)
             ? pools()[static_cast<std::size_t>(device)].load(std::memory_order_acquire)
             : nullptr;
}

expected<DevicePool*, Error> pool_of(int device) noexcept {
  if (DevicePool* pool = existing_pool(device); pool != nullptr) {
    return pool;
  }
  if (device < 0 || device >= kMaxPoolDevices) {
    try {
      return tl::unexpected<Error>(Error{ErrorCode::kInvalidArgument,
                                         "event pool: device " + std::to_string(device) +
                                             " is out of range (0 to " +
                                             std::to_string(kMaxPoolDevices - 1) + ")",
                                         0});
    } catch (...) {
      return tl::unexpected<Error>(Error{ErrorCode::kResourceExhausted, {}, 0});
    }
  }
  auto& slot = pools()[static_cast<std::size_t>(device)];
  DevicePool* pool = nullptr;
  // Made and published whole before a fork() can look for it (see fork_gate.hpp).
  ForkGate::Section section;
  auto* fresh = new (std::nothrow) DevicePool();
  if (fresh == nullptr) {
    return tl::unexpected<Error>(
        make_error(ErrorCode::kResourceExhausted, "event pool: out of host memory"));
  }
  if (!slot.compare_exchange_strong(pool, fresh, std::memory_order_acq_rel)) {
    delete fresh;
    return pool;
  }
  return fresh;
}

expected<cudaEvent_t, Error> create_event(DevicePool& pool, int device) noexcept {
  cudaEvent_t event = nullptr;
  {
    DeviceGuard guard(device);
    if (guard.status() != cudaSuccess) {
      // A device this process lacks is the caller's argument (kInvalidArgument), as everywhere.
      // The message is built on the heap: out of memory, CUDA's error stands alone.
      try {
        return tl::unexpected<Error>(device_guard_error(guard, device, "event pool"));
      } catch (...) {
        return tl::unexpected<Error>(cuda_error(guard.status(), guard.failed_call()));
      }
    }
    cudaError_t status = cuda().event_create_with_flags(&event, cudaEventDisableTiming);
    if (status != cudaSuccess) {
      return tl::unexpected<Error>(cuda_error(status, "cudaEventCreateWithFlags"));
    }
  }
  std::lock_guard<SpinMutex> lock(pool.mutex);
  try {
    // Room for every event made so far grows by half at a time: reserving one more each time
    // allocated (and copied the free list) at every event a growing pool made.
    if (pool.free_events.capacity() <= pool.created) {
      pool.free_events.reserve(std::max<std::size_t>(pool.created + 1, pool.created * 3 / 2));
    }
  } catch (...) {
    (void)succeeded_or_cleared(cuda().event_destroy(event));
    return tl::unexpected<Error>(
        make_error(ErrorCode::kResourceExhausted, "event pool: out of host memory"));
  }
  ++pool.created;
  return event;
}

// Gives `count` events of `device` back to its pool under one lock; null ones are skipped.
void give_back(int device, const cudaEvent_t* events, std::size_t count) noexcept {
  auto pool = pool_of(device);
  if (!pool) {
    return;
  }
  std::lock_guard<SpinMutex> lock((*pool)->mutex);
  for (std::size_t i = 0; i < count; ++i) {
    if (events[i] != nullptr) {
      (*pool)->free_events.push_back(events[i]);  // within the capacity reserved at creation
    }
  }
}

}  // namespace

std::size_t destroy_free_events() noexcept {
  std::size_t held = 0;
  for (auto& slot : pools()) {
    DevicePool* pool = slot.load(std::memory_order_acquire);
    if (pool == nullptr) {
      continue;
    }
    std::lock_guard<SpinMutex> lock(pool->mutex);
    for (cudaEvent_t event : pool->free_events) {
      (void)succeeded_or_cleared(cuda().event_destroy(event));
    }
    pool->created -= pool->free_events.size();
    pool->free_events.clear();
    held += pool->created;
  }
  return held;
}

namespace {

// A free event of `pool`, or null when none is free.
cudaEvent_t take_free_event(DevicePool& pool) noexcept {
  std::lock_guard<SpinMutex> lock(pool.mutex);
  if (pool.free_events.empty()) {
    return nullptr;
  }
  cudaEvent_t event = pool.free_events.back();
  pool.free_events.pop_back();
  return event;
}

}  // namespace

expected<cudaEvent_t, Error> acquire_event(int device) noexcept {
  DevicePool* pool = existing_pool(device);  // the warm path: no expected<> to build and check
  if (pool == nullptr) {
    auto made = pool_of(device);
    if (!made) {
      return tl::unexpected<Error>(std::move(made.error()));
    }
    pool = *made;
  }
  if (cudaEvent_t event = take_free_event(*pool); event != nullptr) {
    return event;
  }
  return create_event(*pool, device);
}

void release_event(int device, cudaEvent_t event) noexcept {
  if (event != nullptr) {
    give_back(device, &event, 1);
  }
}

void EventBatch::flush() noexcept {
  if (count_ != 0) {
    give_back(device_, events_.data(), std::exchange(count_, 0));
  }
}

namespace {

// Gives the free list of `pool` room for just what it holds now (and half again), when a trim left
// it far larger: the room is allocated outside the lock and kept only if it still fits.
void shrink_free_list(DevicePool& pool) noexcept {
  std::size_t created = 0;
  {
    std::lock_guard<SpinMutex> lock(pool.mutex);
    if (pool.free_events.capacity() <= 2 * pool.created + 64) {
      return;
    }
    created = pool.created;
  }
  std::vector<cudaEvent_t> smaller;
  try {
    smaller.reserve(std::max<std::size_t>(created * 3 / 2, 16));
  } catch (...) {
    return;  // out of memory: the larger list stays
  }
  {
    std::lock_guard<SpinMutex> lock(pool.mutex);
    if (smaller.capacity() < pool.created || smaller.capacity() < pool.free_events.size()) {
      return;  // events were made meanwhile: a give-back must never allocate
    }
    smaller.assign(pool.free_events.begin(), pool.free_events.end());  // within the capacity
    std::swap(smaller, pool.free_events);
  }
  // The larger list is freed here, outside the lock.
}

}  // namespace

}  // namespace holoscan::detail

namespace holoscan {

std::size_t trim_stream_events(int device, std::size_t keep) noexcept {
  detail::DevicePool* pool = detail::existing_pool(device);
  if (pool == nullptr) {
    return 0;
  }
  // A few at a time, destroyed outside the lock: a hook taking an event never waits for a trim.
  constexpr std::size_t kChunk = 64;
  std::size_t destroyed = 0;
  for (;;) {
    std::array<cudaEvent_t, kChunk> events{};
    std::size_t count = 0;
    {
      std::lock_guard<detail::SpinMutex> lock(pool->mutex);
      while (count < kChunk && pool->created > keep && !pool->free_events.empty()) {
        events[count++] = pool->free_events.back();
        pool->free_events.pop_back();
        --pool->created;
      }
    }
    for (std::size_t i = 0; i < count; ++i) {
      (void)detail::succeeded_or_cleared(detail::cuda().event_destroy(events[i]));
    }
    destroyed += count;
    if (count < kChunk) {
      break;
    }
  }
  if (destroyed != 0) {
    detail::shrink_free_list(*pool);
  }
  return destroyed;
}

namespace {

// A refusal of reserve_stream_events, led by the call's name as the library's refusals are (left
// as it was when even the longer message does not fit in host memory).
tl::unexpected<Error> reserve_refusal(Error error) noexcept {
  try {
    error.message.insert(0, "reserve_stream_events: ");
  } catch (...) {
  }
  return tl::unexpected<Error>(std::move(error));
}

}  // namespace

expected<void, Error> reserve_stream_events(int device, std::size_t count) {
  auto pool = detail::pool_of(device);
  if (!pool) {
    return reserve_refusal(std::move(pool.error()));
  }
  while (true) {
    {
      std::lock_guard<detail::SpinMutex> lock((*pool)->mutex);
      if ((*pool)->created >= count) {
        return {};
      }
    }
    auto event = detail::create_event(**pool, device);
    if (!event) {
      return reserve_refusal(std::move(event.error()));
    }
    detail::release_event(device, *event);
  }
}

std::size_t created_stream_events(int device) noexcept {
  if (device < 0 || device >= detail::kMaxPoolDevices) {
    return 0;
  }
  detail::DevicePool* pool =
      detail::pools()[static_cast<std::size_t>(device)].load(std::memory_order_acquire);
  if (pool == nullptr) {
    return 0;
  }
  std::lock_guard<detail::SpinMutex> lock(pool->mutex);
  return pool->created;
}

}  // namespace holoscan
