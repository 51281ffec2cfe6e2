#include "support/fake_cuda_ipc.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "cuda/cuda_api.hpp"
#include "holoscan/deferred_release.hpp"
#include "ipc/cuda/cuda_ipc_api.hpp"
#include "ipc/cuda/ipc_event_pool.hpp"
#include "ipc/import/ipc_release_stream.hpp"
#include "support/allocation_hooks.hpp"

namespace holoscan::test {
namespace {

constexpr auto kEntries = static_cast<std::size_t>(CudaIpcEntry::kCount);
constexpr std::uint32_t kEventMagic = 0x45504946;   // "FIPE"
constexpr std::uint32_t kMemoryMagic = 0x4d504946;  // "FIPM"

// The state of every interprocess event lives here, in a page shared with forked children:
// bit 0 says whether the latest record (the rest of the word counts records) has completed.
struct SharedSlot {
  std::atomic<std::uint64_t> state;
  std::atomic<std::uint32_t> used;
};
constexpr std::uint32_t kSlots = 4096;

SharedSlot* shared_slots() {
  static SharedSlot* slots = [] {
    void* page = ::mmap(nullptr, sizeof(SharedSlot) * kSlots, PROT_READ | PROT_WRITE,
                        MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED) {
      std::abort();
    }
    auto* created = static_cast<SharedSlot*>(page);
    for (std::uint32_t i = 0; i < kSlots; ++i) {
      new (&created[i].state) std::atomic<std::uint64_t>(0);
      new (&created[i].used) std::atomic<std::uint32_t>(0);
    }
    return created;
  }();
  return slots;
}

struct EventHandle {
  std::uint32_t magic;
  std::uint32_t slot;
};

struct MemoryHandle {
  std::uint32_t magic;
  std::uint32_t unused;
  std::uintptr_t base;
  std::size_t bytes;
};

struct Event {
  int device = 0;
  bool opened = false;  // an opened handle: it only reads the shared slot
  pid_t owner = 0;      // a forked child's copies of its parent's events only read the slot too
  std::uint32_t slot = 0;
  cudaEvent_t marker = nullptr;    // a runtime event recorded with each record of this one
  std::vector<cudaEvent_t> waits;  // runtime events the stream waited on before the record
  std::uint64_t records = 0;
};

struct Registered {
  std::size_t bytes = 0;
  FakeMemory kind = FakeMemory::kDevice;
  int device = 0;
};

struct Allocation {
  int fd = -1;
  std::size_t bytes = 0;
  std::uint64_t handle_types = 0;
  int device = 0;
};

struct Mapping {
  std::size_t bytes = 0;
  int fd = -1;  // a duplicate, so that the mapping can be retained after its handle is released
  std::uint64_t handle_types = 0;
  int device = 0;
  bool read_only = false;
};

struct Fault {
  int status = 0;
  int remaining = 0;
};

const detail::CudaApi& runtime() { return FakeCuda::table(); }

bool runtime_event_done(cudaEvent_t event) { return runtime().event_query(event) == cudaSuccess; }

}  // namespace

struct FakeCudaIpc::State {
  std::mutex mutex;
  int devices = 1;
  std::unordered_map<int, std::array<std::uint8_t, 16>> uuids;
  // Events are never freed, so that no handle is ever reused by address: `owned` keeps every one,
  // `events` the ones alive.
  std::vector<std::unique_ptr<Event>> owned;
  std::unordered_set<Event*> events;

  Event* add_event() {
    owned.push_back(std::make_unique<Event>());
    events.insert(owned.back().get());
    return owned.back().get();
  }
  std::unordered_map<cudaStream_t, std::vector<cudaEvent_t>> stream_waits;
  std::map<std::uintptr_t, Registered> registered;
  std::unordered_map<std::uintptr_t, int> open_handles;  // legacy base -> open count
  std::unordered_map<std::uint64_t, Allocation> allocations;
  std::uint64_t next_allocation = 1;
  std::map<std::uintptr_t, std::size_t> reservations;
  std::map<std::uintptr_t, Mapping> mappings;
  std::size_t streams = 0;
  std::array<Fault, kEntries> faults{};
  std::array<std::atomic<std::uint64_t>, kEntries> calls{};

  // Whether an event of this process has completed its latest record; publishes it if so.
  static bool owned_here(const Event& event) { return !event.opened && event.owner == ::getpid(); }

  bool evaluate(Event& event) {
    SharedSlot& slot = shared_slots()[event.slot];
    if (!owned_here(event)) {
      return (slot.state.load(std::memory_order_acquire) & 1) != 0;
    }
    if (event.records == 0) {
      return true;  // never recorded: complete, as in CUDA
    }
    const std::uint64_t pending = event.records << 1;
    if (slot.state.load(std::memory_order_acquire) == (pending | 1)) {
      return true;
    }
    for (auto w = event.waits.begin(); w != event.waits.end();) {
      w = runtime_event_done(*w) ? event.waits.erase(w) : w + 1;  // done stays done
    }
    if (!event.waits.empty() || !runtime_event_done(event.marker)) {
      return false;
    }
    std::uint64_t expected = pending;
    slot.state.compare_exchange_strong(expected, pending | 1, std::memory_order_acq_rel);
    return true;
  }

  void settle() {
    for (Event* event : events) {
      if (owned_here(*event)) {
        (void)evaluate(*event);
      }
    }
  }

  Event* event_of(cudaEvent_t handle) {
    auto* event = reinterpret_cast<Event*>(handle);
    return events.count(event) != 0 ? event : nullptr;
  }

  const Registered* registered_at(std::uintptr_t address, std::uintptr_t* base) const {
    auto after = registered.upper_bound(address);
    if (after == registered.begin()) {
      return nullptr;
    }
    --after;
    if (address >= after->first + after->second.bytes) {
      return nullptr;
    }
    *base = after->first;
    return &after->second;
  }

  Mapping* mapping_at(std::uintptr_t address, std::uintptr_t* base) {
    auto after = mappings.upper_bound(address);
    if (after == mappings.begin()) {
      return nullptr;
    }
    --after;
    if (address >= after->first + after->second.bytes) {
      return nullptr;
    }
    *base = after->first;
    return &after->second;
  }
};

namespace {

FakeCudaIpc::State* the_state = nullptr;

FakeCudaIpc::State& state() { return *the_state; }

using State = FakeCudaIpc::State;
using Lock = std::unique_lock<std::mutex>;

// Counts the call, consumes an armed fault, publishes this process's completed events, then runs
// the body under the simulation's lock.
template <class Result, class Body>
Result call(CudaIpcEntry entry, Body&& body) {
  const AllocationsNeverFail bookkeeping;  // the real runtime never throws into the library
  State& s = state();
  Lock lock(s.mutex);
  s.calls[static_cast<std::size_t>(entry)].fetch_add(1, std::memory_order_relaxed);
  Fault& fault = s.faults[static_cast<std::size_t>(entry)];
  if (fault.remaining > 0) {
    --fault.remaining;
    return static_cast<Result>(fault.status);
  }
  s.settle();
  return body(s, lock);
}

// The runtime's current device of this thread, made `device` for a scope.
class RuntimeDevice {
 public:
  explicit RuntimeDevice(int device) {
    (void)runtime().get_device(&previous_);
    (void)runtime().set_device(device);
  }
  ~RuntimeDevice() { (void)runtime().set_device(previous_); }
  RuntimeDevice(const RuntimeDevice&) = delete;
  RuntimeDevice& operator=(const RuntimeDevice&) = delete;

 private:
  int previous_ = 0;
};

// The device of a runtime stream, or -1 for a handle the runtime refuses.
int stream_device(cudaStream_t stream) {
  int device = -1;
  return runtime().stream_get_device(stream, &device) == cudaSuccess ? device : -1;
}

cudaError_t event_create_with_flags(cudaEvent_t* handle, unsigned int) {
  return call<cudaError_t>(CudaIpcEntry::kEventCreateWithFlags, [&](State& s, Lock&) {
    SharedSlot* slots = shared_slots();
    std::uint32_t slot = 0;
    for (; slot < kSlots; ++slot) {
      std::uint32_t unused = 0;
      if (slots[slot].used.compare_exchange_strong(unused, 1)) {
        break;
      }
    }
    if (slot == kSlots) {
      return cudaErrorMemoryAllocation;
    }
    slots[slot].state.store(1, std::memory_order_release);  // never recorded: complete
    Event* event = s.add_event();
    (void)runtime().get_device(&event->device);
    event->slot = slot;
    event->owner = ::getpid();
    *handle = reinterpret_cast<cudaEvent_t>(event);
    return cudaSuccess;
  });
}

cudaError_t event_destroy(cudaEvent_t handle) {
  return call<cudaError_t>(CudaIpcEntry::kEventDestroy, [&](State& s, Lock&) {
    Event* event = s.event_of(handle);
    if (event == nullptr) {
      return cudaErrorInvalidResourceHandle;
    }
    if (State::owned_here(*event)) {
      shared_slots()[event->slot].used.store(0, std::memory_order_release);
      if (event->marker != nullptr) {
        (void)runtime().event_destroy(event->marker);
      }
    }
    s.events.erase(event);
    return cudaSuccess;
  });
}

cudaError_t event_record(cudaEvent_t handle, cudaStream_t stream) {
  return call<cudaError_t>(CudaIpcEntry::kEventRecord, [&](State& s, Lock&) {
    Event* event = s.event_of(handle);
    if (event == nullptr || !State::owned_here(*event) || stream_device(stream) != event->device) {
      return cudaErrorInvalidResourceHandle;
    }
    if (event->marker == nullptr) {
      RuntimeDevice on(event->device);
      if (cudaError_t status = runtime().event_create_with_flags(&event->marker, 0);
          status != cudaSuccess) {
        return status;
      }
    }
    if (cudaError_t status = runtime().event_record(event->marker, stream); status != cudaSuccess) {
      return status;
    }
    event->waits = s.stream_waits[stream];
    ++event->records;
    shared_slots()[event->slot].state.store(event->records << 1, std::memory_order_release);
    (void)s.evaluate(*event);  // an event with nothing to wait for is complete at once, as on a GPU
    return cudaSuccess;
  });
}

cudaError_t event_query(cudaEvent_t handle) {
  return call<cudaError_t>(CudaIpcEntry::kEventQuery, [&](State& s, Lock&) {
    Event* event = s.event_of(handle);
    if (event == nullptr) {
      return cudaErrorInvalidResourceHandle;
    }
    return s.evaluate(*event) ? cudaSuccess : cudaErrorNotReady;
  });
}

// Blocks like CUDA until the event completes (another thread or process completes it).
cudaError_t event_synchronize(cudaEvent_t handle) {
  for (;;) {
    const cudaError_t status =
        call<cudaError_t>(CudaIpcEntry::kEventSynchronize, [&](State& s, Lock&) -> cudaError_t {
          Event* event = s.event_of(handle);
          if (event == nullptr) {
            return cudaErrorInvalidResourceHandle;
          }
          return s.evaluate(*event) ? cudaSuccess : cudaErrorNotReady;
        });
    if (status != cudaErrorNotReady) {
      return status;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

cudaError_t stream_wait_event(cudaStream_t stream, cudaEvent_t handle, unsigned int) {
  return call<cudaError_t>(CudaIpcEntry::kStreamWaitEvent, [&](State& s, Lock&) {
    if (stream_device(stream) < 0) {
      return cudaErrorInvalidResourceHandle;
    }
    if (s.event_of(handle) != nullptr) {
      return cudaSuccess;  // a consumer waiting on an interprocess event: checked, orders nothing
    }
    // A runtime event (a deallocation point): what the stream records next completes after it.
    const cudaError_t status = runtime().event_query(handle);
    if (status == cudaErrorNotReady) {
      s.stream_waits[stream].push_back(handle);
      return cudaSuccess;
    }
    return status;
  });
}

cudaError_t stream_create_with_flags(cudaStream_t* stream, unsigned int) {
  return call<cudaError_t>(CudaIpcEntry::kStreamCreateWithFlags, [&](State& s, Lock&) {
    int device = 0;
    (void)runtime().get_device(&device);
    *stream = FakeCuda::instance().create_stream(device);
    ++s.streams;
    return cudaSuccess;
  });
}

cudaError_t stream_destroy(cudaStream_t stream) {
  return call<cudaError_t>(CudaIpcEntry::kStreamDestroy, [&](State& s, Lock&) {
    if (stream_device(stream) < 0) {
      return cudaErrorInvalidResourceHandle;
    }
    FakeCuda::instance().destroy_stream(stream);
    s.stream_waits.erase(stream);
    --s.streams;
    return cudaSuccess;
  });
}

cudaError_t ipc_get_event_handle(cudaIpcEventHandle_t* handle, cudaEvent_t event_handle) {
  return call<cudaError_t>(CudaIpcEntry::kIpcGetEventHandle, [&](State& s, Lock&) {
    Event* event = s.event_of(event_handle);
    if (event == nullptr || event->opened) {
      return cudaErrorInvalidResourceHandle;
    }
    *handle = cudaIpcEventHandle_t{};
    const EventHandle bytes{kEventMagic, event->slot};
    std::memcpy(handle->reserved, &bytes, sizeof(bytes));
    return cudaSuccess;
  });
}

cudaError_t ipc_open_event_handle(cudaEvent_t* opened, cudaIpcEventHandle_t handle) {
  return call<cudaError_t>(CudaIpcEntry::kIpcOpenEventHandle, [&](State& s, Lock&) {
    EventHandle bytes{};
    std::memcpy(&bytes, handle.reserved, sizeof(bytes));
    if (bytes.magic != kEventMagic || bytes.slot >= kSlots) {
      return cudaErrorInvalidResourceHandle;
    }
    Event* event = s.add_event();
    event->opened = true;
    event->slot = bytes.slot;
    (void)runtime().get_device(&event->device);
    *opened = reinterpret_cast<cudaEvent_t>(event);
    return cudaSuccess;
  });
}

cudaError_t ipc_get_mem_handle(cudaIpcMemHandle_t* handle, void* pointer) {
  return call<cudaError_t>(CudaIpcEntry::kIpcGetMemHandle, [&](State& s, Lock&) {
    std::uintptr_t base = 0;
    const Registered* memory = s.registered_at(reinterpret_cast<std::uintptr_t>(pointer), &base);
    if (memory == nullptr || memory->kind != FakeMemory::kDevice) {
      return cudaErrorInvalidValue;
    }
    *handle = cudaIpcMemHandle_t{};
    const MemoryHandle bytes{kMemoryMagic, 0, base, memory->bytes};
    std::memcpy(handle->reserved, &bytes, sizeof(bytes));
    return cudaSuccess;
  });
}

// The memory behind a legacy handle is the registered range itself: a forked child sees the
// parent's bytes as they were at fork(), the same process sees them live.
cudaError_t ipc_open_mem_handle(void** pointer, cudaIpcMemHandle_t handle, unsigned int) {
  return call<cudaError_t>(CudaIpcEntry::kIpcOpenMemHandle, [&](State& s, Lock&) {
    MemoryHandle bytes{};
    std::memcpy(&bytes, handle.reserved, sizeof(bytes));
    if (bytes.magic != kMemoryMagic) {
      return cudaErrorInvalidValue;
    }
    ++s.open_handles[bytes.base];
    *pointer = reinterpret_cast<void*>(bytes.base);
    return cudaSuccess;
  });
}

cudaError_t ipc_close_mem_handle(void* pointer) {
  return call<cudaError_t>(CudaIpcEntry::kIpcCloseMemHandle, [&](State& s, Lock&) {
    const auto found = s.open_handles.find(reinterpret_cast<std::uintptr_t>(pointer));
    if (found == s.open_handles.end()) {
      return cudaErrorInvalidValue;
    }
    if (--found->second == 0) {
      s.open_handles.erase(found);
    }
    return cudaSuccess;
  });
}

cudaError_t get_device_count(int* count) {
  return call<cudaError_t>(CudaIpcEntry::kGetDeviceCount, [&](State& s, Lock&) {
    *count = s.devices;
    return cudaSuccess;
  });
}

// What the driver reports for one pointer.
struct Facts {
  unsigned int memory_type = 0;
  int managed = 0;
  int device = -1;
  int legacy = 0;
  std::uint64_t handle_types = 0;
  CUmemoryPool pool = nullptr;
  CUdeviceptr start = 0;
  std::size_t size = 0;
};

Facts facts_of(State& s, std::uintptr_t address) {
  Facts facts;
  std::uintptr_t base = 0;
  if (const Mapping* mapping = s.mapping_at(address, &base)) {
    facts.memory_type = CU_MEMORYTYPE_DEVICE;
    facts.device = mapping->device;
    facts.handle_types = mapping->handle_types;
    facts.start = base;
    facts.size = mapping->bytes;
    return facts;
  }
  const Registered* memory = s.registered_at(address, &base);
  if (memory == nullptr) {
    return facts;  // unknown to CUDA: all attributes zero, as the driver reports pageable memory
  }
  facts.device = memory->device;
  facts.start = base;
  facts.size = memory->bytes;
  facts.memory_type =
      memory->kind == FakeMemory::kPinnedHost ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
  facts.managed = memory->kind == FakeMemory::kManaged ? 1 : 0;
  facts.legacy = memory->kind == FakeMemory::kDevice ? 1 : 0;
  if (memory->kind == FakeMemory::kStreamOrderedPool) {
    static int pool;
    facts.pool = reinterpret_cast<CUmemoryPool>(&pool);
  }
  return facts;
}

CUresult pointer_get_attributes(unsigned int count, CUpointer_attribute* attributes, void** data,
                                CUdeviceptr pointer) {
  return call<CUresult>(CudaIpcEntry::kPointerGetAttributes, [&](State& s, Lock&) {
    const Facts facts = facts_of(s, pointer);
    for (unsigned int i = 0; i < count; ++i) {
      switch (attributes[i]) {
        case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
          *static_cast<unsigned int*>(data[i]) = facts.memory_type;
          break;
        case CU_POINTER_ATTRIBUTE_IS_MANAGED:
          *static_cast<int*>(data[i]) = facts.managed;
          break;
        case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
          *static_cast<int*>(data[i]) = facts.device;
          break;
        case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
          *static_cast<int*>(data[i]) = facts.legacy;
          break;
        case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
          *static_cast<std::uint64_t*>(data[i]) = facts.handle_types;
          break;
        case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
          *static_cast<CUmemoryPool*>(data[i]) = facts.pool;
          break;
        case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
          *static_cast<CUdeviceptr*>(data[i]) = facts.start;
          break;
        case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
          *static_cast<std::size_t*>(data[i]) = facts.size;
          break;
        default:
          return CUDA_ERROR_INVALID_VALUE;
      }
    }
    return CUDA_SUCCESS;
  });
}

CUresult mem_get_address_range(CUdeviceptr* base, std::size_t* size, CUdeviceptr pointer) {
  return call<CUresult>(CudaIpcEntry::kMemGetAddressRange, [&](State& s, Lock&) {
    const Facts facts = facts_of(s, pointer);
    if (facts.size == 0 || facts.memory_type != CU_MEMORYTYPE_DEVICE) {
      return CUDA_ERROR_NOT_FOUND;
    }
    *base = facts.start;
    *size = facts.size;
    return CUDA_SUCCESS;
  });
}

CUresult add_allocation(State& s, int fd, std::size_t bytes, std::uint64_t types, int device,
                        CUmemGenericAllocationHandle* handle) {
  const std::uint64_t id = s.next_allocation++;
  s.allocations[id] = Allocation{fd, bytes, types, device};
  *handle = id;
  return CUDA_SUCCESS;
}

CUresult mem_retain_allocation_handle(CUmemGenericAllocationHandle* handle, void* address) {
  return call<CUresult>(CudaIpcEntry::kMemRetainAllocationHandle, [&](State& s, Lock&) {
    std::uintptr_t base = 0;
    const Mapping* mapping = s.mapping_at(reinterpret_cast<std::uintptr_t>(address), &base);
    if (mapping == nullptr) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    const int fd = ::fcntl(mapping->fd, F_DUPFD_CLOEXEC, 0);
    return add_allocation(s, fd, mapping->bytes, mapping->handle_types, mapping->device, handle);
  });
}

CUresult mem_get_allocation_granularity(std::size_t* granularity, const CUmemAllocationProp*,
                                        CUmemAllocationGranularity_flags) {
  return call<CUresult>(CudaIpcEntry::kMemGetAllocationGranularity, [&](State&, Lock&) {
    *granularity = FakeCudaIpc::kGranularity;
    return CUDA_SUCCESS;
  });
}

CUresult mem_create(CUmemGenericAllocationHandle* handle, std::size_t size,
                    const CUmemAllocationProp* prop, unsigned long long) {
  return call<CUresult>(CudaIpcEntry::kMemCreate, [&](State& s, Lock&) {
    if (prop == nullptr || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
        prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE || prop->location.id < 0 ||
        prop->location.id >= s.devices || size == 0 || size % FakeCudaIpc::kGranularity != 0) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    const int fd = ::memfd_create("holoscan-fake-vmm", MFD_CLOEXEC);
    if (fd < 0 || ::ftruncate(fd, static_cast<off_t>(size)) != 0) {
      if (fd >= 0) {
        ::close(fd);
      }
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return add_allocation(s, fd, size, prop->requestedHandleTypes, prop->location.id, handle);
  });
}

CUresult mem_release(CUmemGenericAllocationHandle handle) {
  return call<CUresult>(CudaIpcEntry::kMemRelease, [&](State& s, Lock&) {
    const auto found = s.allocations.find(handle);
    if (found == s.allocations.end()) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    ::close(found->second.fd);
    s.allocations.erase(found);
    return CUDA_SUCCESS;
  });
}

CUresult mem_export_to_shareable_handle(void* shareable, CUmemGenericAllocationHandle handle,
                                        CUmemAllocationHandleType type, unsigned long long) {
  return call<CUresult>(CudaIpcEntry::kMemExportToShareableHandle, [&](State& s, Lock&) {
    const auto found = s.allocations.find(handle);
    if (found == s.allocations.end() || type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    if ((found->second.handle_types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) == 0) {
      return CUDA_ERROR_NOT_PERMITTED;
    }
    *static_cast<int*>(shareable) = ::fcntl(found->second.fd, F_DUPFD_CLOEXEC, 0);
    return CUDA_SUCCESS;
  });
}

CUresult mem_import_from_shareable_handle(CUmemGenericAllocationHandle* handle, void* os_handle,
                                          CUmemAllocationHandleType type) {
  return call<CUresult>(CudaIpcEntry::kMemImportFromShareableHandle, [&](State& s, Lock&) {
    const int fd = static_cast<int>(reinterpret_cast<std::intptr_t>(os_handle));
    struct stat facts {};
    if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR || ::fstat(fd, &facts) != 0 ||
        facts.st_size <= 0) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    // The driver keeps no reference to the caller's descriptor: the fake keeps its own.
    const int own = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
    return add_allocation(s, own, static_cast<std::size_t>(facts.st_size),
                          CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0, handle);
  });
}

CUresult mem_address_reserve(CUdeviceptr* pointer, std::size_t size, std::size_t, CUdeviceptr,
                             unsigned long long) {
  return call<CUresult>(CudaIpcEntry::kMemAddressReserve, [&](State& s, Lock&) {
    void* range =
        ::mmap(nullptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (size == 0 || range == MAP_FAILED) {
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *pointer = reinterpret_cast<CUdeviceptr>(range);
    s.reservations[*pointer] = size;
    return CUDA_SUCCESS;
  });
}

CUresult mem_address_free(CUdeviceptr pointer, std::size_t size) {
  return call<CUresult>(CudaIpcEntry::kMemAddressFree, [&](State& s, Lock&) {
    const auto found = s.reservations.find(pointer);
    if (found == s.reservations.end() || found->second != size) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    ::munmap(reinterpret_cast<void*>(pointer), size);
    s.reservations.erase(found);
    return CUDA_SUCCESS;
  });
}

CUresult mem_map(CUdeviceptr pointer, std::size_t size, std::size_t offset,
                 CUmemGenericAllocationHandle handle, unsigned long long) {
  return call<CUresult>(CudaIpcEntry::kMemMap, [&](State& s, Lock&) {
    const auto allocation = s.allocations.find(handle);
    auto reservation = s.reservations.upper_bound(pointer);
    if (allocation == s.allocations.end() || offset != 0 || size != allocation->second.bytes ||
        reservation == s.reservations.begin()) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    --reservation;
    if (pointer + size > reservation->first + reservation->second) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    if (::mmap(reinterpret_cast<void*>(pointer), size, PROT_NONE, MAP_SHARED | MAP_FIXED,
               allocation->second.fd, 0) == MAP_FAILED) {
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    s.mappings[pointer] =
        Mapping{size, ::fcntl(allocation->second.fd, F_DUPFD_CLOEXEC, 0),
                allocation->second.handle_types, allocation->second.device, false};
    return CUDA_SUCCESS;
  });
}

CUresult mem_unmap(CUdeviceptr pointer, std::size_t size) {
  return call<CUresult>(CudaIpcEntry::kMemUnmap, [&](State& s, Lock&) {
    const auto found = s.mappings.find(pointer);
    if (found == s.mappings.end() || found->second.bytes != size) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    // Back to a bare reservation, as cuMemUnmap leaves it.
    ::mmap(reinterpret_cast<void*>(pointer), size, PROT_NONE,
           MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
    ::close(found->second.fd);
    s.mappings.erase(found);
    return CUDA_SUCCESS;
  });
}

CUresult mem_set_access(CUdeviceptr pointer, std::size_t size, const CUmemAccessDesc* desc,
                        std::size_t count) {
  return call<CUresult>(CudaIpcEntry::kMemSetAccess, [&](State& s, Lock&) {
    const auto found = s.mappings.find(pointer);
    if (found == s.mappings.end() || found->second.bytes != size || count != 1 ||
        desc->location.type != CU_MEM_LOCATION_TYPE_DEVICE || desc->location.id < 0 ||
        desc->location.id >= s.devices) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    const bool read_only = desc->flags == CU_MEM_ACCESS_FLAGS_PROT_READ;
    const int protection = read_only ? PROT_READ : PROT_READ | PROT_WRITE;
    if (::mprotect(reinterpret_cast<void*>(pointer), size, protection) != 0) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    found->second.read_only = read_only;
    found->second.device = desc->location.id;
    return CUDA_SUCCESS;
  });
}

CUresult device_get_uuid(CUuuid* uuid, int device) {
  return call<CUresult>(CudaIpcEntry::kDeviceGetUuid, [&](State& s, Lock&) {
    if (device < 0 || device >= s.devices) {
      return CUDA_ERROR_INVALID_DEVICE;
    }
    const auto set = s.uuids.find(device);
    const auto bytes = set != s.uuids.end() ? set->second : FakeCudaIpc::default_uuid(device);
    std::memcpy(uuid->bytes, bytes.data(), bytes.size());
    return CUDA_SUCCESS;
  });
}

const char* driver_error_name(CUresult status) {
  switch (status) {
    case CUDA_SUCCESS:
      return "CUDA_SUCCESS";
    case CUDA_ERROR_INVALID_VALUE:
      return "CUDA_ERROR_INVALID_VALUE";
    case CUDA_ERROR_OUT_OF_MEMORY:
      return "CUDA_ERROR_OUT_OF_MEMORY";
    case CUDA_ERROR_INVALID_DEVICE:
      return "CUDA_ERROR_INVALID_DEVICE";
    case CUDA_ERROR_NOT_FOUND:
      return "CUDA_ERROR_NOT_FOUND";
    case CUDA_ERROR_NOT_PERMITTED:
      return "CUDA_ERROR_NOT_PERMITTED";
    case CUDA_ERROR_NOT_SUPPORTED:
      return "CUDA_ERROR_NOT_SUPPORTED";
    default:
      return nullptr;
  }
}

CUresult get_error_name(CUresult status, const char** name) {
  *name = driver_error_name(status);
  return *name != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult get_error_string(CUresult status, const char** text) {
  *text = driver_error_name(status) != nullptr ? "fake driver error" : nullptr;
  return *text != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

const detail::CudaIpcApi kFakeTable = {
    &event_create_with_flags,
    &event_destroy,
    &event_record,
    &event_query,
    &event_synchronize,
    &stream_wait_event,
    &stream_create_with_flags,
    &stream_destroy,
    &ipc_get_event_handle,
    &ipc_open_event_handle,
    &ipc_get_mem_handle,
    &ipc_open_mem_handle,
    &ipc_close_mem_handle,
    &get_device_count,
    &pointer_get_attributes,
    &mem_get_address_range,
    &mem_retain_allocation_handle,
    &mem_get_allocation_granularity,
    &mem_create,
    &mem_release,
    &mem_export_to_shareable_handle,
    &mem_import_from_shareable_handle,
    &mem_address_reserve,
    &mem_address_free,
    &mem_map,
    &mem_unmap,
    &mem_set_access,
    &device_get_uuid,
    &get_error_name,
    &get_error_string,
};

// The lock is held across fork(), so that no other thread holds it in the child; the forking
// thread, which took it, gives it back on both sides (no condition variable to remake here).
void lock_for_fork() { state().mutex.lock(); }
void unlock_after_fork() { state().mutex.unlock(); }

}  // namespace

FakeCudaIpc::FakeCudaIpc() : state_(new State()) {
  the_state = state_;
  (void)shared_slots();
  (void)pthread_atfork(lock_for_fork, unlock_after_fork, unlock_after_fork);
}

FakeCudaIpc& FakeCudaIpc::instance() {
  static FakeCudaIpc* fake = new FakeCudaIpc();  // leaked: the release thread may call in late
  return *fake;
}

const detail::CudaIpcApi& FakeCudaIpc::table() noexcept { return kFakeTable; }

std::array<std::uint8_t, 16> FakeCudaIpc::default_uuid(int device) {
  std::array<std::uint8_t, 16> uuid{0xfa, 0xce, 0x00, 0x0d, 0xc0, 0xda, 0x00, 0x00,
                                    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
  uuid[15] = static_cast<std::uint8_t>(device);
  return uuid;
}

void FakeCudaIpc::reset(int devices) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  // What a failed test left behind goes, so that the next one starts clean.
  for (Event* event : state_->events) {
    if (State::owned_here(*event)) {
      shared_slots()[event->slot].used.store(0, std::memory_order_release);
    }
  }
  for (const auto& [base, mapping] : state_->mappings) {
    ::close(mapping.fd);
  }
  for (const auto& [base, bytes] : state_->reservations) {
    ::munmap(reinterpret_cast<void*>(base), bytes);
  }
  for (const auto& [id, allocation] : state_->allocations) {
    ::close(allocation.fd);
  }
  state_->mappings.clear();
  state_->reservations.clear();
  state_->allocations.clear();
  state_->streams = 0;
  state_->devices = devices;
  state_->uuids.clear();
  state_->events.clear();
  state_->stream_waits.clear();
  state_->registered.clear();
  state_->open_handles.clear();
  state_->faults.fill(Fault{});
  for (auto& count : state_->calls) {
    count.store(0, std::memory_order_relaxed);
  }
}

void FakeCudaIpc::add_memory(const void* base, std::size_t bytes, FakeMemory kind, int device) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->registered[reinterpret_cast<std::uintptr_t>(base)] = Registered{bytes, kind, device};
}

void FakeCudaIpc::set_uuid(int device, const std::array<std::uint8_t, 16>& uuid) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->uuids[device] = uuid;
}

void FakeCudaIpc::settle() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->settle();
}

void FakeCudaIpc::fail_next(CudaIpcEntry entry, int status, int count) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->faults[static_cast<std::size_t>(entry)] = Fault{status, count};
}

std::uint64_t FakeCudaIpc::calls(CudaIpcEntry entry) const noexcept {
  return state_->calls[static_cast<std::size_t>(entry)].load(std::memory_order_relaxed);
}

std::size_t FakeCudaIpc::live_events() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->events.size();
}

std::size_t FakeCudaIpc::live_allocations() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->allocations.size();
}

std::size_t FakeCudaIpc::live_reservations() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->reservations.size();
}

std::size_t FakeCudaIpc::live_mappings() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->mappings.size();
}

std::size_t FakeCudaIpc::open_memory_handles() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  std::size_t open = 0;
  for (const auto& [base, count] : state_->open_handles) {
    open += static_cast<std::size_t>(count);
  }
  return open;
}

std::size_t FakeCudaIpc::live_streams() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->streams;
}

bool FakeCudaIpc::event_done(const std::array<std::uint8_t, 64>& handle) {
  cudaIpcEventHandle_t ipc_handle{};
  std::memcpy(&ipc_handle, handle.data(), sizeof(ipc_handle));
  cudaEvent_t opened = nullptr;
  if (ipc_open_event_handle(&opened, ipc_handle) != cudaSuccess) {
    ADD_FAILURE() << "not an interprocess event handle of the fake";
    return false;
  }
  const bool done = event_query(opened) == cudaSuccess;
  (void)event_destroy(opened);
  return done;
}

bool FakeCudaIpc::mapped_read_only(const void* address) const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  std::uintptr_t base = 0;
  const Mapping* mapping = state_->mapping_at(reinterpret_cast<std::uintptr_t>(address), &base);
  return mapping != nullptr && mapping->read_only;
}

FakeCudaIpcScope::FakeCudaIpcScope(int devices) : cuda_(devices) {
  FakeCudaIpc& ipc = FakeCudaIpc::instance();
  ipc.reset(devices);
  previous_ = detail::install_cuda_ipc_api(&FakeCudaIpc::table());
}

FakeCudaIpcScope::~FakeCudaIpcScope() {
  FakeCudaIpc& ipc = FakeCudaIpc::instance();
  fake().complete_all();
  ipc.settle();
  flush_deferred_releases();
  detail::reset_release_streams();
  const std::size_t held = detail::destroy_free_ipc_events();
  if (held != 0 || ipc.live_events() != 0) {
    ADD_FAILURE() << held << " interprocess event(s) still held and " << ipc.live_events()
                  << " fake interprocess event(s) alive at the end of the scope";
  }
  if (ipc.live_allocations() != 0 || ipc.live_reservations() != 0 || ipc.live_mappings() != 0) {
    ADD_FAILURE() << ipc.live_allocations() << " VMM handle(s), " << ipc.live_reservations()
                  << " reservation(s) and " << ipc.live_mappings() << " mapping(s) left";
  }
  if (ipc.open_memory_handles() != 0) {
    ADD_FAILURE() << ipc.open_memory_handles() << " legacy memory handle(s) never closed";
  }
  if (ipc.live_streams() != 0) {
    ADD_FAILURE() << ipc.live_streams() << " release stream(s) never destroyed";
  }
  detail::install_cuda_ipc_api(previous_);
}

}  // namespace holoscan::test
