#include "support/fake_cuda.hpp"

#include <gtest/gtest.h>
#include <pthread.h>

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "cuda/cuda_api.hpp"
#include "holoscan/deferred_release.hpp"
#include "stream/pooled_events.hpp"
#include "support/allocation_hooks.hpp"

namespace holoscan::test {
namespace {

constexpr auto kEntries = static_cast<std::size_t>(CudaEntry::kCount);

struct Stream;

// What cudaStreamWaitEvent adds to a stream: work after operation `op` of the waiting stream
// also waits until `on` has reached `position` (with the waits `on` had before `on_op`).
struct Dependency {
  std::uint64_t op = 0;
  const Stream* on = nullptr;
  std::uint64_t position = 0;
  std::uint64_t on_op = 0;
};

struct Stream {
  int device = 0;
  std::uint64_t launched = 0;
  std::uint64_t completed = 0;
  std::uint64_t ops = 0;  // records and waits issued on the stream, in order
  std::vector<Dependency> waits;
  // waits[0, waits_passed) are known to be reached: a wait, once reached, stays so (streams only
  // complete), so none is asked about twice. Without it a long test's web of waits between
  // streams made every question retrace it, exponentially.
  mutable std::size_t waits_passed = 0;
  bool destroyed = false;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
};

struct Event {
  int device = 0;
  const Stream* stream = nullptr;  // null until recorded
  std::uint64_t position = 0;
  std::uint64_t op = 0;  // the record's operation index on `stream`
  bool captured = false;
  bool destroyed = false;
  std::uint64_t process = 0;  // State::process of the record: a forked child's differs
};

// Whether `stream` has passed `position` and every wait issued on it before operation `op`.
// Each step goes back in time (a wait names an earlier record), so the recursion ends.
bool reached(const Stream& stream, std::uint64_t position, std::uint64_t op) {
  if (stream.completed < position) {
    return false;
  }
  // The waits are in issue order, so those before `op` are a prefix.
  for (std::size_t i = stream.waits_passed; i < stream.waits.size() && stream.waits[i].op < op;
       ++i) {
    const Dependency& wait = stream.waits[i];
    if (!reached(*wait.on, wait.position, wait.on_op)) {
      return false;
    }
    stream.waits_passed = i + 1;
  }
  return true;
}

// Memory the fake runtime handed out: what cudaPointerGetAttributes reports for it.
struct Allocation {
  std::size_t bytes = 0;
  int device = 0;
  cudaMemoryType type = cudaMemoryTypeDevice;
};

// Work queued on a stream that the "GPU" does once the stream passes it: a copy or a
// stream-ordered free. It runs under the simulation's lock.
struct Operation {
  const Stream* stream = nullptr;
  std::uint64_t position = 0;
  std::uint64_t op = 0;
  std::function<void()> run;
};

struct Fault {
  cudaError_t error = cudaSuccess;
  int remaining = 0;
  int skip = 0;  // calls that pass before the first failure
};

// Per thread, as in CUDA; they outlive reset() like a real thread's state outlives a test.
thread_local int current_device_of_thread = 0;
thread_local cudaStreamCaptureMode capture_mode_of_thread = cudaStreamCaptureModeGlobal;
thread_local cudaError_t last_error_of_thread = cudaSuccess;

bool is_default_handle(cudaStream_t stream) {
  return stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread;
}

}  // namespace

struct FakeCuda::State {
  std::mutex mutex;
  std::condition_variable progress;  // a stream completed, a fault was armed, or a reset
  std::uint64_t generation = 0;
  // Counts the forks this process descends from (renew_after_fork): a CUDA context does not
  // survive a fork(), so an event recorded before one fails its query and wait in the child, as
  // with the real runtime (cudaErrorInitializationError); records made in the child work.
  std::uint64_t process = 0;
  int devices = 1;
  // Objects are never freed, so that no handle is ever reused by address; reset() only forgets
  // them (a handle from before a reset is unknown afterwards).
  std::vector<std::unique_ptr<Stream>> owned_streams;
  std::vector<std::unique_ptr<Event>> owned_events;
  std::unordered_set<const Stream*> streams;
  std::unordered_map<cudaStream_t, Stream*> reused_handles;  // reuse_stream_handle()
  std::vector<Stream*> default_streams;                      // one per device
  std::unordered_set<const Event*> events;
  std::unordered_map<void*, Allocation> allocations;
  std::vector<Operation> operations;  // queued, in the order they were issued
  std::array<Fault, kEntries> faults{};
  std::array<std::atomic<std::uint64_t>, kEntries> calls{};

  // Counts the call and returns the injected fault for it, if one is armed.
  cudaError_t enter(CudaEntry entry) {
    calls[static_cast<std::size_t>(entry)].fetch_add(1, std::memory_order_relaxed);
    Fault& fault = faults[static_cast<std::size_t>(entry)];
    if (fault.remaining == 0) {
      return cudaSuccess;
    }
    if (fault.skip > 0) {
      --fault.skip;
      return cudaSuccess;
    }
    --fault.remaining;
    return fault.error;
  }

  Stream* stream_of(cudaStream_t handle) {
    if (is_default_handle(handle)) {
      const int device = current_device_of_thread;
      return device >= 0 && device < devices ? default_streams[device] : nullptr;
    }
    if (const auto reused = reused_handles.find(handle); reused != reused_handles.end()) {
      return reused->second;
    }
    auto* stream = reinterpret_cast<Stream*>(handle);
    return streams.count(stream) != 0 ? stream : nullptr;
  }

  // CUDA's rule for a potentially unsafe call (an event query or wait) while a capture in global
  // mode is under way: refused from a thread in global mode, and the capture is invalidated. The
  // fake takes every active capture for one begun in global mode.
  bool refused_by_a_capture() {
    if (capture_mode_of_thread != cudaStreamCaptureModeGlobal) {
      return false;
    }
    bool refused = false;
    const auto invalidate = [&](Stream* stream) {
      if (stream->capture == cudaStreamCaptureStatusActive) {
        stream->capture = cudaStreamCaptureStatusInvalidated;
        refused = true;
      }
    };
    for (const Stream* stream : streams) {
      invalidate(const_cast<Stream*>(stream));
    }
    for (Stream* stream : default_streams) {
      invalidate(stream);
    }
    return refused;
  }

  Event* event_of(cudaEvent_t handle) {
    auto* event = reinterpret_cast<Event*>(handle);
    return events.count(event) != 0 && !event->destroyed ? event : nullptr;
  }

  Stream* add_stream(int device) {
    owned_streams.push_back(std::make_unique<Stream>());
    Stream* stream = owned_streams.back().get();
    stream->device = device;
    return stream;
  }

  // Host memory standing for an allocation of `type` on `device`.
  cudaError_t allocate(void** memory, std::size_t bytes, int device, cudaMemoryType type) {
    void* allocated = std::malloc(bytes == 0 ? 1 : bytes);
    if (allocated == nullptr) {
      return cudaErrorMemoryAllocation;
    }
    try {
      allocations.emplace(allocated, Allocation{bytes == 0 ? 1 : bytes, device, type});
    } catch (const std::bad_alloc&) {  // the runtime's own bookkeeping: an error, never a throw
      std::free(allocated);
      return cudaErrorMemoryAllocation;
    }
    *memory = allocated;
    return cudaSuccess;
  }

  // Frees `memory` if the runtime handed it out as one of `types`.
  cudaError_t release(void* memory, cudaMemoryType type, cudaMemoryType other_type) {
    if (memory == nullptr) {
      return cudaSuccess;
    }
    const auto found = allocations.find(memory);
    if (found == allocations.end() ||
        (found->second.type != type && found->second.type != other_type)) {
      return cudaErrorInvalidValue;
    }
    allocations.erase(found);
    std::free(memory);
    return cudaSuccess;
  }
  cudaError_t release(void* memory, cudaMemoryType type) { return release(memory, type, type); }

  // Queues `run` on `stream` after everything issued on it so far; runs it now if that is done.
  void enqueue(Stream& stream, std::function<void()> run) {
    operations.push_back(Operation{&stream, stream.launched, ++stream.ops, std::move(run)});
    run_ready_operations();
  }

  // Runs every queued operation whose stream has passed it (one stream's in issue order).
  void run_ready_operations() {
    for (auto it = operations.begin(); it != operations.end();) {
      if (reached(*it->stream, it->position, it->op)) {
        it->run();
        it = operations.erase(it);
      } else {
        ++it;
      }
    }
  }

  // The allocation `pointer` points into, or null.
  const Allocation* allocation_of(const void* pointer) const {
    const auto* address = static_cast<const char*>(pointer);
    for (const auto& [base, allocation] : allocations) {
      const auto* begin = static_cast<const char*>(base);
      if (address >= begin && address < begin + allocation.bytes) {
        return &allocation;
      }
    }
    return nullptr;
  }

  static bool done(const Event& event) {
    return event.stream == nullptr || reached(*event.stream, event.position, event.op);
  }
};

namespace {

FakeCuda::State* the_state = nullptr;  // set once by FakeCuda's constructor, never freed

FakeCuda::State& state() { return *the_state; }

// Every entry runs its body under the lock after counting the call and consuming an armed fault;
// a failure becomes the thread's last error, as in CUDA (not-ready is no error). The bookkeeping's
// allocations never fail: the real runtime does not throw into the library's noexcept calls.
template <class Body>
cudaError_t call(CudaEntry entry, Body&& body) {
  const AllocationsNeverFail bookkeeping;
  FakeCuda::State& s = state();
  std::unique_lock<std::mutex> lock(s.mutex);
  cudaError_t status = s.enter(entry);
  if (status == cudaSuccess) {
    status = body(s, lock);
  }
  if (status != cudaSuccess && status != cudaErrorNotReady) {
    last_error_of_thread = status;
  }
  return status;
}

using Lock = std::unique_lock<std::mutex>;
using State = FakeCuda::State;

cudaError_t event_record(cudaEvent_t handle, cudaStream_t stream_handle) {
  return call(CudaEntry::kEventRecord, [&](State& s, Lock&) {
    Stream* stream = s.stream_of(stream_handle);
    Event* event = s.event_of(handle);
    if (stream == nullptr || stream->destroyed || event == nullptr) {
      return cudaErrorInvalidResourceHandle;
    }
    if (event->device != stream->device) {
      return cudaErrorInvalidResourceHandle;  // CUDA: event and stream of one device
    }
    event->stream = stream;
    event->process = s.process;
    event->position = stream->launched;
    event->op = ++stream->ops;
    event->captured = stream->capture != cudaStreamCaptureStatusNone;
    return cudaSuccess;
  });
}

cudaError_t stream_wait_event(cudaStream_t stream_handle, cudaEvent_t handle, unsigned int) {
  return call(CudaEntry::kStreamWaitEvent, [&](State& s, Lock&) {
    Stream* stream = s.stream_of(stream_handle);
    Event* event = s.event_of(handle);
    if (stream == nullptr || stream->destroyed || event == nullptr) {
      return cudaErrorInvalidResourceHandle;
    }
    if (stream->capture != cudaStreamCaptureStatusNone && !event->captured) {
      return cudaErrorStreamCaptureIsolation;
    }
    if (event->stream != nullptr) {  // waiting on a never-recorded event orders nothing
      stream->waits.push_back(Dependency{++stream->ops, event->stream, event->position, event->op});
    }
    return cudaSuccess;
  });
}

cudaError_t event_query(cudaEvent_t handle) {
  return call(CudaEntry::kEventQuery, [&](State& s, Lock&) {
    Event* event = s.event_of(handle);
    if (event == nullptr) {
      return cudaErrorInvalidResourceHandle;
    }
    if (event->stream != nullptr && event->process != s.process) {
      return cudaErrorInitializationError;  // recorded by the parent, before a fork()
    }
    if (event->captured) {
      return cudaErrorCapturedEvent;
    }
    if (s.refused_by_a_capture()) {
      return cudaErrorStreamCaptureUnsupported;
    }
    return FakeCuda::State::done(*event) ? cudaSuccess : cudaErrorNotReady;
  });
}

cudaError_t event_synchronize(cudaEvent_t handle) {
  return call(CudaEntry::kEventSynchronize, [&](State& s, Lock& lock) {
    Event* event = s.event_of(handle);
    if (event == nullptr) {
      return cudaErrorInvalidResourceHandle;
    }
    if (event->stream != nullptr && event->process != s.process) {
      return cudaErrorInitializationError;  // recorded by the parent, before a fork()
    }
    if (event->captured) {
      return cudaErrorCapturedEvent;
    }
    if (s.refused_by_a_capture()) {  // a wait is as unsafe as a query
      return cudaErrorStreamCaptureUnsupported;
    }
    // Blocks like CUDA until the stream passes the event; a fault armed meanwhile, or a reset,
    // ends the wait with that failure.
    Fault& fault = s.faults[static_cast<std::size_t>(CudaEntry::kEventSynchronize)];
    const std::uint64_t generation = s.generation;
    s.progress.wait(lock, [&] {
      return FakeCuda::State::done(*event) || (fault.remaining > 0 && fault.skip == 0) ||
             s.generation != generation;
    });
    if (s.generation != generation) {
      return cudaErrorInvalidResourceHandle;
    }
    if (!FakeCuda::State::done(*event)) {
      --fault.remaining;
      return fault.error;
    }
    return cudaSuccess;
  });
}

cudaError_t event_create_with_flags(cudaEvent_t* handle, unsigned int) {
  return call(CudaEntry::kEventCreateWithFlags, [&](State& s, Lock&) {
    s.owned_events.push_back(std::make_unique<Event>());
    Event* event = s.owned_events.back().get();
    event->device = current_device_of_thread;
    s.events.insert(event);
    *handle = reinterpret_cast<cudaEvent_t>(event);
    return cudaSuccess;
  });
}

cudaError_t event_destroy(cudaEvent_t handle) {
  return call(CudaEntry::kEventDestroy, [&](State& s, Lock&) {
    Event* event = s.event_of(handle);
    if (event == nullptr) {
      return cudaErrorInvalidResourceHandle;
    }
    event->destroyed = true;
    s.events.erase(event);
    return cudaSuccess;
  });
}

cudaError_t get_device(int* device) {
  return call(CudaEntry::kGetDevice, [&](State&, Lock&) {
    *device = current_device_of_thread;
    return cudaSuccess;
  });
}

cudaError_t set_device(int device) {
  return call(CudaEntry::kSetDevice, [&](State& s, Lock&) {
    if (device < 0 || device >= s.devices) {
      return cudaErrorInvalidDevice;
    }
    current_device_of_thread = device;
    return cudaSuccess;
  });
}

cudaError_t stream_get_device(cudaStream_t handle, int* device) {
  return call(CudaEntry::kStreamGetDevice, [&](State& s, Lock&) {
    Stream* stream = s.stream_of(handle);
    if (stream == nullptr || stream->destroyed) {
      return cudaErrorInvalidResourceHandle;
    }
    *device = stream->device;
    return cudaSuccess;
  });
}

cudaError_t stream_is_capturing(cudaStream_t handle, cudaStreamCaptureStatus* status) {
  return call(CudaEntry::kStreamIsCapturing, [&](State& s, Lock&) {
    Stream* stream = s.stream_of(handle);
    if (stream == nullptr || stream->destroyed) {
      return cudaErrorInvalidResourceHandle;
    }
    *status = stream->capture;
    return cudaSuccess;
  });
}

cudaError_t thread_exchange_stream_capture_mode(cudaStreamCaptureMode* mode) {
  return call(CudaEntry::kThreadExchangeStreamCaptureMode, [&](State&, Lock&) {
    std::swap(*mode, capture_mode_of_thread);
    return cudaSuccess;
  });
}

// An allocation may synchronize: as unsafe during another thread's global capture as a free.
cudaError_t device_malloc(void** memory, std::size_t bytes) {
  return call(CudaEntry::kMalloc, [&](State& s, Lock&) {
    if (s.refused_by_a_capture()) {
      return cudaErrorStreamCaptureUnsupported;
    }
    return s.allocate(memory, bytes, current_device_of_thread, cudaMemoryTypeDevice);
  });
}

// A free synchronizes the device: as unsafe during a capture as a query (the memory stays).
cudaError_t device_free(void* memory) {
  return call(CudaEntry::kFree, [&](State& s, Lock&) {
    if (s.refused_by_a_capture()) {
      return cudaErrorStreamCaptureUnsupported;
    }
    return s.release(memory, cudaMemoryTypeDevice, cudaMemoryTypeManaged);
  });
}

cudaError_t malloc_async(void** memory, std::size_t bytes, cudaStream_t handle) {
  return call(CudaEntry::kMallocAsync, [&](State& s, Lock&) {
    Stream* stream = s.stream_of(handle);
    if (stream == nullptr || stream->destroyed) {
      return cudaErrorInvalidResourceHandle;
    }
    return s.allocate(memory, bytes, stream->device, cudaMemoryTypeDevice);
  });
}

// The memory goes back once the stream passes the free, as with CUDA's stream-ordered pools.
cudaError_t free_async(void* memory, cudaStream_t handle) {
  return call(CudaEntry::kFreeAsync, [&](State& s, Lock&) {
    Stream* stream = s.stream_of(handle);
    if (stream == nullptr || stream->destroyed) {
      return cudaErrorInvalidResourceHandle;
    }
    const auto found = s.allocations.find(memory);
    if (found == s.allocations.end() || found->second.type != cudaMemoryTypeDevice) {
      return cudaErrorInvalidValue;
    }
    s.enqueue(*stream, [&s, memory] { (void)s.release(memory, cudaMemoryTypeDevice); });
    return cudaSuccess;
  });
}

cudaError_t malloc_host(void** memory, std::size_t bytes) {
  return call(CudaEntry::kMallocHost, [&](State& s, Lock&) {
    if (s.refused_by_a_capture()) {
      return cudaErrorStreamCaptureUnsupported;
    }
    return s.allocate(memory, bytes, current_device_of_thread, cudaMemoryTypeHost);
  });
}

cudaError_t free_host(void* memory) {
  return call(CudaEntry::kFreeHost, [&](State& s, Lock&) {
    if (s.refused_by_a_capture()) {
      return cudaErrorStreamCaptureUnsupported;
    }
    return s.release(memory, cudaMemoryTypeHost);
  });
}

cudaError_t malloc_managed(void** memory, std::size_t bytes, unsigned int) {
  return call(CudaEntry::kMallocManaged, [&](State& s, Lock&) {
    if (s.refused_by_a_capture()) {
      return cudaErrorStreamCaptureUnsupported;
    }
    return s.allocate(memory, bytes, current_device_of_thread, cudaMemoryTypeManaged);
  });
}

// A copy is done by the "GPU": once the stream passes it (at once on an idle stream).
cudaError_t memcpy_2d(CudaEntry entry, void* destination, std::size_t destination_pitch,
                      const void* source, std::size_t source_pitch, std::size_t width,
                      std::size_t height, cudaStream_t handle) {
  return call(entry, [&](State& s, Lock&) {
    Stream* stream = s.stream_of(handle);
    if (stream == nullptr || stream->destroyed) {
      return cudaErrorInvalidResourceHandle;
    }
    if (destination_pitch < width || source_pitch < width) {
      return cudaErrorInvalidPitchValue;
    }
    if ((destination == nullptr || source == nullptr) && width * height != 0) {
      return cudaErrorInvalidValue;
    }
    s.enqueue(*stream, [=] {
      for (std::size_t row = 0; row < height; ++row) {
        std::memcpy(static_cast<char*>(destination) + row * destination_pitch,
                    static_cast<const char*>(source) + row * source_pitch, width);
      }
    });
    return cudaSuccess;
  });
}

cudaError_t memcpy_async(void* destination, const void* source, std::size_t bytes, cudaMemcpyKind,
                         cudaStream_t stream) {
  return memcpy_2d(CudaEntry::kMemcpyAsync, destination, bytes, source, bytes, bytes, 1, stream);
}

cudaError_t memcpy_2d_async(void* destination, std::size_t destination_pitch, const void* source,
                            std::size_t source_pitch, std::size_t width, std::size_t height,
                            cudaMemcpyKind, cudaStream_t stream) {
  return memcpy_2d(CudaEntry::kMemcpy2DAsync, destination, destination_pitch, source, source_pitch,
                   width, height, stream);
}

// Not through call(): reading the last error must not set it again.
cudaError_t get_last_error() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (cudaError_t fault = s.enter(CudaEntry::kGetLastError)) {
    return fault;
  }
  return std::exchange(last_error_of_thread, cudaSuccess);
}

cudaError_t stream_synchronize(cudaStream_t handle) {
  return call(CudaEntry::kStreamSynchronize, [&](State& s, Lock& lock) {
    Stream* stream = s.stream_of(handle);
    if (stream == nullptr || stream->destroyed) {
      return cudaErrorInvalidResourceHandle;
    }
    if (s.refused_by_a_capture()) {  // a wait is as unsafe as a query
      return cudaErrorStreamCaptureUnsupported;
    }
    const std::uint64_t target = stream->launched;
    const std::uint64_t op = stream->ops + 1;
    const std::uint64_t generation = s.generation;
    s.progress.wait(lock,
                    [&] { return reached(*stream, target, op) || s.generation != generation; });
    return s.generation == generation ? cudaSuccess : cudaErrorInvalidResourceHandle;
  });
}

cudaError_t stream_create_with_flags(cudaStream_t* handle, unsigned int) {
  return call(CudaEntry::kStreamCreateWithFlags, [&](State& s, Lock&) {
    const int device = current_device_of_thread;
    if (device < 0 || device >= s.devices) {
      return cudaErrorInvalidDevice;
    }
    Stream* stream = s.add_stream(device);
    s.streams.insert(stream);
    *handle = reinterpret_cast<cudaStream_t>(stream);
    return cudaSuccess;
  });
}

// Memory the fake handed out is reported as what it stands for; every other pointer is host
// memory the runtime does not know, as a plain malloc would be.
cudaError_t pointer_get_attributes(cudaPointerAttributes* attributes, const void* pointer) {
  return call(CudaEntry::kPointerGetAttributes, [&](State& s, Lock&) {
    *attributes = cudaPointerAttributes{};
    attributes->type = cudaMemoryTypeUnregistered;
    attributes->device = -1;
    if (const Allocation* allocation = s.allocation_of(pointer)) {
      attributes->type = allocation->type;
      attributes->device = allocation->device;
    }
    return cudaSuccess;
  });
}

// A stream's id is its handle's address: the fake never reuses an address.
cudaError_t stream_get_id(cudaStream_t handle, unsigned long long* id) {
  return call(CudaEntry::kStreamGetId, [&](State& s, Lock&) {
    Stream* stream = s.stream_of(handle);
    if (stream == nullptr || stream->destroyed) {
      return cudaErrorInvalidResourceHandle;
    }
    *id = reinterpret_cast<std::uintptr_t>(stream);
    return cudaSuccess;
  });
}

// Names and descriptions are the fake's own: see fake_cuda_errors.cpp.
const char* get_error_name(cudaError_t status) {
  const char* name = FakeCuda::error_name(status);
  return name != nullptr ? name : "unrecognized error code (fake runtime)";
}

const char* get_error_string(cudaError_t status) { return FakeCuda::error_description(status); }

const detail::CudaApi kFakeTable = {
    &event_record,
    &stream_wait_event,
    &event_query,
    &event_synchronize,
    &event_create_with_flags,
    &event_destroy,
    &get_device,
    &set_device,
    &stream_get_device,
    &stream_is_capturing,
    &thread_exchange_stream_capture_mode,
    &device_malloc,
    &device_free,
    &get_last_error,
    &get_error_name,
    &get_error_string,
    &stream_synchronize,
    &pointer_get_attributes,
    &stream_get_id,
    &stream_create_with_flags,
    &malloc_async,
    &free_async,
    &malloc_host,
    &free_host,
    &malloc_managed,
    &memcpy_async,
    &memcpy_2d_async,
};

// A fork() while another thread (the release thread, say) is inside the fake would leave its lock
// held forever in the child: the lock is taken around the fork by the forking thread, which gives
// it back on both sides (a lock made anew over the held one instead would stay held in
// ThreadSanitizer's eyes, which then reports every later lock taken in the child as nested in
// it); the child gets a fresh condition variable (the old one may name threads that do not exist
// there).
void lock_for_fork() { state().mutex.lock(); }
void unlock_after_fork() { state().mutex.unlock(); }
void renew_after_fork() {
  ++state().process;
  state().mutex.unlock();
  new (&state().progress) std::condition_variable();
}

}  // namespace

FakeCuda::FakeCuda() : state_(new State()) {
  the_state = state_;
  (void)pthread_atfork(lock_for_fork, unlock_after_fork, renew_after_fork);
  reset(1);
}

FakeCuda& FakeCuda::instance() {
  static FakeCuda* fake = new FakeCuda();  // leaked: the release thread may call in at any time
  return *fake;
}

const detail::CudaApi& FakeCuda::table() noexcept { return kFakeTable; }

void FakeCuda::reset(int devices) {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    ++state_->generation;
    state_->devices = devices;
    state_->streams.clear();
    state_->reused_handles.clear();
    state_->events.clear();
    state_->default_streams.clear();
    for (int device = 0; device < devices; ++device) {
      state_->default_streams.push_back(state_->add_stream(device));
    }
    for (const auto& allocation : state_->allocations) {
      std::free(allocation.first);
    }
    state_->allocations.clear();
    state_->operations.clear();
    state_->faults.fill(Fault{});
    for (auto& count : state_->calls) {
      count.store(0, std::memory_order_relaxed);
    }
  }
  state_->progress.notify_all();
}

cudaStream_t FakeCuda::create_stream(int device) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  Stream* stream = state_->add_stream(device);
  state_->streams.insert(stream);
  return reinterpret_cast<cudaStream_t>(stream);
}

cudaStream_t FakeCuda::reuse_stream_handle(cudaStream_t destroyed, int device) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  Stream* stream = state_->add_stream(device);
  state_->streams.insert(stream);
  state_->reused_handles[destroyed] = stream;
  return destroyed;
}

void FakeCuda::destroy_stream(cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  if (Stream* found = state_->stream_of(stream)) {
    found->destroyed = true;
  }
}

void FakeCuda::launch(cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  if (Stream* found = state_->stream_of(stream)) {
    ++found->launched;
  }
}

void FakeCuda::complete(cudaStream_t stream) { (void)complete_counting(stream, CudaEntry{}); }

std::uint64_t FakeCuda::complete_counting(cudaStream_t stream, CudaEntry entry) {
  std::uint64_t count = 0;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    count = calls(entry);  // calls are counted under this lock (call())
    if (Stream* found = state_->stream_of(stream)) {
      found->completed = found->launched;
    }
    state_->run_ready_operations();
  }
  state_->progress.notify_all();
  return count;
}

void FakeCuda::complete_all() {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    for (const auto& stream : state_->owned_streams) {
      stream->completed = stream->launched;
    }
    state_->run_ready_operations();
  }
  state_->progress.notify_all();
}

void FakeCuda::set_capture(cudaStream_t stream, cudaStreamCaptureStatus status) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  if (Stream* found = state_->stream_of(stream)) {
    found->capture = status;
  }
}

void FakeCuda::fail_next(CudaEntry entry, cudaError_t error, int count) {
  fail_after(entry, 0, error, count);
}

void FakeCuda::fail_after(CudaEntry entry, int skip, cudaError_t error, int count) {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->faults[static_cast<std::size_t>(entry)] = Fault{error, count, skip};
  }
  state_->progress.notify_all();
}

void FakeCuda::clear_faults() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->faults.fill(Fault{});
}

std::uint64_t FakeCuda::calls(CudaEntry entry) const noexcept {
  return state_->calls[static_cast<std::size_t>(entry)].load(std::memory_order_relaxed);
}

std::size_t FakeCuda::live_events() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->events.size();
}

std::size_t FakeCuda::live_allocations() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->allocations.size();
}

int FakeCuda::current_device() const noexcept { return current_device_of_thread; }

cudaError_t FakeCuda::last_error() const noexcept { return last_error_of_thread; }

FakeCudaScope::FakeCudaScope(int devices) {
  if (detail::destroy_free_events() != 0) {
    ADD_FAILURE() << "events of the previous CUDA table are still held: they would reach the fake";
  }
  FakeCuda::instance().reset(devices);
  previous_ = detail::install_cuda_api(&FakeCuda::table());
}

FakeCudaScope::~FakeCudaScope() {
  FakeCuda& fake = FakeCuda::instance();
  fake.clear_faults();
  fake.complete_all();
  flush_deferred_releases();
  const std::size_t held = detail::destroy_free_events();
  if (held != 0 || fake.live_events() != 0) {
    ADD_FAILURE() << held << " pooled event(s) still held and " << fake.live_events()
                  << " fake event(s) alive at the end of the fake runtime's scope";
  }
  if (fake.live_allocations() != 0) {
    ADD_FAILURE() << fake.live_allocations() << " fake device allocation(s) never freed";
  }
  detail::install_cuda_api(previous_);
}

}  // namespace holoscan::test
