#include "stream/pooled_events.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <mutex>
#include <new>
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
  unlock_pools_after_fork();
  ForkGate::open_in_child();
}

// Registered when the library is loaded, before any thread of the library exists.
[[maybe_unused]] const bool fork_handlers_registered =
    pthread_atfork(lock_pools_for_fork, unlock_pools_in_parent, unlock_pools_in_child) == 0;

expected<DevicePool*, Error> pool_of(int device) noexcept {
  if (device < 0 || device >= kMaxPoolDevices) {
    return tl::unexpected<Error>(
        make_error(ErrorCode::kInvalidArgument, "event pool: device id is out of range"));
  }
  auto& slot = pools()[static_cast<std::size_t>(device)];
  DevicePool* pool = slot.load(std::memory_order_acquire);
  if (pool != nullptr) {
    return pool;
  }
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

// Bumped by destroy_free_events(): events a thread kept from before belong to a table whose free
// events were destroyed (tests swap tables); they are forgotten, never handed out again.
std::atomic<std::uint64_t> pool_generation{1};

// Events moved between a thread's own free events and the shared pool at once: one lock of the
// pool per kBatch events a thread takes or gives back, not one per event.
constexpr std::size_t kBatch = 8;

// A thread's own free events, of the device it last took an event of: taken and given back
// without the pool's lock, whose cache line would otherwise move between the threads that
// record points and the release thread, which returns their events. At most 2 * kBatch; given
// back to the pool when the thread ends. Only a thread that takes events keeps any: the release
// thread, which only gives back, gives straight to the pool (see release_event()).
struct ThreadEvents {
  int device = -1;  // -1: no event taken yet
  std::uint64_t generation = 0;
  std::size_t count = 0;
  std::array<cudaEvent_t, 2 * kBatch> events{};

  ThreadEvents() = default;
  ThreadEvents(const ThreadEvents&) = delete;
  ThreadEvents& operator=(const ThreadEvents&) = delete;
  // Afterwards (a static owner destroyed on the exiting thread) events go straight to the pool.
  ~ThreadEvents() {
    give_back(count);
    device = -1;
  }

  bool serves(int wanted) const noexcept {
    return device == wanted && generation == pool_generation.load(std::memory_order_relaxed);
  }
  void give_back(std::size_t how_many) noexcept;
  void take_from(DevicePool& pool, int wanted) noexcept;
};

thread_local ThreadEvents thread_events;

// The newest `how_many` events go back to the pool of `device` under one lock (or are forgotten
// if a table swap made them stale).
void ThreadEvents::give_back(std::size_t how_many) noexcept {
  how_many = std::min(how_many, count);
  if (how_many == 0) {
    return;
  }
  count -= how_many;
  if (generation != pool_generation.load(std::memory_order_relaxed)) {
    return;
  }
  auto pool = pool_of(device);
  if (!pool) {
    return;
  }
  std::lock_guard<SpinMutex> lock((*pool)->mutex);
  for (std::size_t i = 0; i < how_many; ++i) {
    (*pool)->free_events.push_back(events[count + i]);  // within the capacity reserved
  }
}

// Makes this thread's events those of `wanted` (the others go back) and takes up to kBatch free
// events of its pool, under one lock.
void ThreadEvents::take_from(DevicePool& pool, int wanted) noexcept {
  if (!serves(wanted)) {
    give_back(count);
    device = wanted;
    generation = pool_generation.load(std::memory_order_relaxed);
  }
  std::lock_guard<SpinMutex> lock(pool.mutex);
  auto& free_events = pool.free_events;
  const std::size_t taken = std::min(kBatch, free_events.size());
  for (std::size_t i = 0; i < taken; ++i) {
    events[count++] = free_events.back();
    free_events.pop_back();
  }
}

expected<cudaEvent_t, Error> create_event(DevicePool& pool, int device) noexcept {
  cudaEvent_t event = nullptr;
  {
    DeviceGuard guard(device);
    if (guard.status() != cudaSuccess) {
      return tl::unexpected<Error>(cuda_error(guard.status(), guard.failed_call()));
    }
    cudaError_t status = cuda().event_create_with_flags(&event, cudaEventDisableTiming);
    if (status != cudaSuccess) {
      return tl::unexpected<Error>(cuda_error(status, "cudaEventCreateWithFlags"));
    }
  }
  std::lock_guard<SpinMutex> lock(pool.mutex);
  try {
    // Doubling: a pool grown one event at a time (a backlog of releases) copies its list
    // a logarithmic number of times, not once per event.
    if (pool.free_events.capacity() < pool.created + 1) {
      pool.free_events.reserve(std::max(pool.created + 1, 2 * pool.free_events.capacity()));
    }
  } catch (...) {
    (void)cuda().event_destroy(event);
    return tl::unexpected<Error>(
        make_error(ErrorCode::kResourceExhausted, "event pool: out of host memory"));
  }
  ++pool.created;
  return event;
}

}  // namespace

std::size_t destroy_free_events() noexcept {
  thread_events.give_back(thread_events.count);
  pool_generation.fetch_add(1, std::memory_order_relaxed);
  std::size_t held = 0;
  for (auto& slot : pools()) {
    DevicePool* pool = slot.load(std::memory_order_acquire);
    if (pool == nullptr) {
      continue;
    }
    std::lock_guard<SpinMutex> lock(pool->mutex);
    for (cudaEvent_t event : pool->free_events) {
      (void)cuda().event_destroy(event);
    }
    pool->created -= pool->free_events.size();
    pool->free_events.clear();
    held += pool->created;
  }
  return held;
}

expected<cudaEvent_t, Error> acquire_event(int device) noexcept {
  ThreadEvents& own = thread_events;
  if (own.count != 0 && own.serves(device)) {
    return own.events[--own.count];
  }
  auto pool = pool_of(device);
  if (!pool) {
    return tl::unexpected<Error>(std::move(pool.error()));
  }
  own.take_from(**pool, device);
  if (own.count != 0) {
    return own.events[--own.count];
  }
  return create_event(**pool, device);  // none free: the only event made here
}

void release_event(int device, cudaEvent_t event) noexcept {
  if (event == nullptr) {
    return;
  }
  ThreadEvents& own = thread_events;
  if (own.serves(device)) {
    if (own.count == own.events.size()) {
      own.give_back(kBatch);
    }
    own.events[own.count++] = event;
    return;
  }
  auto pool = pool_of(device);
  if (!pool) {
    return;
  }
  std::lock_guard<SpinMutex> lock((*pool)->mutex);
  (*pool)->free_events.push_back(event);  // within the capacity reserved at creation
}

void EventBatch::flush() noexcept {
  if (count_ == 0) {
    return;
  }
  const std::size_t count = std::exchange(count_, 0);
  auto pool = pool_of(device_);
  if (!pool) {
    return;
  }
  std::lock_guard<SpinMutex> lock((*pool)->mutex);
  for (std::size_t i = 0; i < count; ++i) {
    if (events_[i] != nullptr) {
      (*pool)->free_events.push_back(events_[i]);  // within the capacity reserved at creation
    }
  }
}

}  // namespace holoscan::detail

namespace holoscan {

expected<void, Error> reserve_stream_events(int device, std::size_t count) {
  auto pool = detail::pool_of(device);
  if (!pool) {
    return tl::unexpected<Error>(std::move(pool.error()));
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
      return tl::unexpected<Error>(std::move(event.error()));
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
