#pragma once
// A CPU simulation of CUDA's cross-process features, installed through the cross-process code's
// table (src/ipc/cuda/cuda_ipc_api.hpp) beside the fake runtime of fake_cuda.hpp:
// - interprocess events: recorded on the fake runtime's streams, completing when the stream (and
//   every event a release stream was told to wait on) has; their state lives in a page shared
//   with forked children, so an event opened in another process sees it;
// - VMM memory: each allocation is a memfd, mapped with mmap wherever it is imported, so a test
//   reads in one process what another wrote (read-only mappings are PROT_READ);
// - legacy IPC memory handles for ranges the test registers as cudaMalloc memory;
// - pointer attributes for the kinds of memory the test registers, and device UUIDs.
#include <array>
#include <cstddef>
#include <cstdint>

#include "ipc/cuda/cuda_ipc_api.hpp"  // the table's type carries the library's ABI tag
#include "support/fake_cuda.hpp"

namespace holoscan::test {

/** @brief The entries of the cross-process table, for fault injection and call counters. */
enum class CudaIpcEntry : int {
  kEventCreateWithFlags,
  kEventDestroy,
  kEventRecord,
  kEventQuery,
  kEventSynchronize,
  kStreamWaitEvent,
  kStreamCreateWithFlags,
  kStreamDestroy,
  kIpcGetEventHandle,
  kIpcOpenEventHandle,
  kIpcGetMemHandle,
  kIpcOpenMemHandle,
  kIpcCloseMemHandle,
  kGetDeviceCount,
  kPointerGetAttributes,
  kMemGetAddressRange,
  kMemRetainAllocationHandle,
  kMemGetAllocationGranularity,
  kMemCreate,
  kMemRelease,
  kMemExportToShareableHandle,
  kMemImportFromShareableHandle,
  kMemAddressReserve,
  kMemAddressFree,
  kMemMap,
  kMemUnmap,
  kMemSetAccess,
  kDeviceGetUuid,
  kCount,  ///< Number of entries, not an entry.
};

/** @brief Kinds of memory a test registers, as the driver's pointer attributes describe them. */
enum class FakeMemory {
  kDevice,             ///< cudaMalloc memory: legacy IPC capable.
  kDeviceUnshareable,  ///< Device memory neither legacy IPC capable nor exportable as an fd.
  kStreamOrderedPool,  ///< cudaMallocAsync memory (a memory pool handle).
  kManaged,            ///< cudaMallocManaged memory.
  kPinnedHost,         ///< cudaMallocHost or cudaHostRegister memory.
};

/** @brief The simulation (one per process, never destroyed; forked children get a copy). */
class FakeCudaIpc {
 public:
  /** @brief The allocation granularity the fake reports (larger than a page, to catch rounding). */
  static constexpr std::size_t kGranularity = 64 * 1024;

  /** @brief The simulation, created on first use (create it before forking). */
  static FakeCudaIpc& instance();
  /** @brief The table whose entries call into the simulation. */
  static const detail::CudaIpcApi& table() noexcept;
  /** @brief The UUID device `device` has unless set_uuid changed it. */
  static std::array<std::uint8_t, 16> default_uuid(int device);

  /** @brief Forgets this process's objects, faults and counters; `devices` devices. */
  void reset(int devices);
  /** @brief Registers [base, base + bytes) as memory of `kind` on `device`. */
  void add_memory(const void* base, std::size_t bytes, FakeMemory kind, int device = 0);
  /** @brief Gives device `device` another UUID in this process. */
  void set_uuid(int device, const std::array<std::uint8_t, 16>& uuid);
  /** @brief Publishes the completion of this process's interprocess events to other processes
   *         (every call into the table does it too). */
  void settle();

  /** @brief The next `count` calls of `entry` fail with `status` (a cudaError_t or CUresult). */
  void fail_next(CudaIpcEntry entry, int status, int count = 1);
  /** @brief Calls of `entry` since reset(), failed ones included. */
  std::uint64_t calls(CudaIpcEntry entry) const noexcept;

  /** @brief Interprocess events created or opened and not destroyed. */
  std::size_t live_events() const;
  /** @brief VMM allocation handles not released. */
  std::size_t live_allocations() const;
  /** @brief Address reservations not freed. */
  std::size_t live_reservations() const;
  /** @brief VMM mappings not unmapped. */
  std::size_t live_mappings() const;
  /** @brief Legacy memory handles opened and not closed. */
  std::size_t open_memory_handles() const;
  /** @brief Streams created through the table and not destroyed. */
  std::size_t live_streams() const;
  /** @brief Whether the interprocess event behind `handle` (cudaIpcEventHandle_t bytes) has
   *         completed, as a process that opens it sees it. */
  static bool event_done(const std::array<std::uint8_t, 64>& handle);
  /** @brief Whether the VMM mapping containing `address` is read-only (false if none is). */
  bool mapped_read_only(const void* address) const;

  struct State;  ///< Objects, faults and counters (defined in fake_cuda_ipc.cpp).

 private:
  FakeCudaIpc();
  State* state_;  // leaked with the instance
};

/**
 * @brief The fake runtime (FakeCudaScope) plus the cross-process fake, for one scope.
 *
 * On exit it completes every stream, waits for the deferred releases, gives the release streams
 * and interprocess events back, reports (as a test failure) any interprocess event, VMM object,
 * opened memory handle or stream still held, and puts the previous tables back.
 */
class FakeCudaIpcScope {
 public:
  /** @brief Resets both simulations and installs them. */
  explicit FakeCudaIpcScope(int devices = 1);
  /** @brief Drains, checks for leaks and restores the previous tables. */
  ~FakeCudaIpcScope();
  FakeCudaIpcScope(const FakeCudaIpcScope&) = delete;
  FakeCudaIpcScope& operator=(const FakeCudaIpcScope&) = delete;

  /** @brief The runtime simulation. */
  FakeCuda& fake() const noexcept { return FakeCuda::instance(); }
  /** @brief The cross-process simulation. */
  FakeCudaIpc& ipc() const noexcept { return FakeCudaIpc::instance(); }

 private:
  FakeCudaScope cuda_;
  const detail::CudaIpcApi* previous_;
};

}  // namespace holoscan::test
