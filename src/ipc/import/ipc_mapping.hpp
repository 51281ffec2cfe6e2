#pragma once
// Another process's allocation mapped into this one, and the importer's cache of them: one
// mapping per (exporter, allocation id), reused by every import from that allocation.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <unordered_map>

#include "holoscan/expected.hpp"
#include "holoscan/export.hpp"
#include "holoscan/ipc/descriptor.hpp"
#include "holoscan/ipc/fd.hpp"
#include "holoscan/ipc/message.hpp"
#include "ipc/cuda/ipc_opened_event.hpp"
#include "ipc/cuda/vmm_allocation.hpp"

namespace holoscan::ipc::detail {

/** @brief An exported allocation mapped here; unmapped (or its IPC handle closed) when destroyed.
 */
class HOLOSCAN_DLPACK_ABI ImportedMapping {
 public:
  /** @brief Maps the allocation `descriptor` names on `device` (`fd` for kPosixFd, else -1). */
  static expected<std::shared_ptr<ImportedMapping>, Error> open(const TensorDescriptor& descriptor,
                                                                int fd, int device);
  /** @brief Unmaps; the importer destroys a mapping only after its GPU work on it is done. */
  ~ImportedMapping();
  ImportedMapping(const ImportedMapping&) = delete;
  ImportedMapping& operator=(const ImportedMapping&) = delete;

  /** @brief Where the allocation starts in this process. */
  char* base() const noexcept { return base_; }
  /** @brief The device it is mapped on. */
  int device() const noexcept { return device_; }
  /** @brief Whether it is a legacy mapping (cudaIpcOpenMemHandle), which must be closed before
   *         the exporter frees the memory. */
  bool legacy() const noexcept { return legacy_ != nullptr; }

 private:
  ImportedMapping() = default;
  std::unique_ptr<holoscan::detail::VmmAllocation> vmm_;  // kPosixFd
  char* legacy_ = nullptr;                                // kCudaIpc: cudaIpcOpenMemHandle's
  char* base_ = nullptr;
  int device_ = 0;
  pid_t opener_ = ::getpid();  // a forked child's copy unmaps nothing (CUDA is unusable there)
};

/**
 * @brief One exporter's mappings, by allocation id; not thread-safe (the core's cuda_mutex_ guards
 * it).
 *
 * A mapping stays cached while the exporter is connected, so that each of its allocations is
 * mapped once. kPosixFd mappings stay until the exporter says to forget them (forget(): it then
 * sends the fd again with the allocation's next export), since later exports of the allocation
 * come without the fd; only an exporter that breaks that bound (kRememberedAllocations) loses
 * its least recently used ones. kCudaIpc mappings (the handle comes with every export) past
 * kMaxIdle are unmapped, the least recently used that no import holds first. An allocation id
 * of 0 means the exporter cannot tell allocations apart (memory that is not a pool's): such
 * memory is mapped for one import and unmapped after it.
 */
class HOLOSCAN_DLPACK_ABI MappingCache {
 public:
  /** @brief Mappings kept while no import uses them. */
  static constexpr std::size_t kMaxIdle = 64;

  /**
   * @brief The mapping for `descriptor`'s allocation, mapped now unless cached; closes `fd`. A
   *        kPosixFd allocation not cached needs its `fd` (kInvalidArgument without).
   *
   * Whose word it rests on: `from_channel` (a Publish) is the exporter's, whose fd says what the
   * allocation is; only mappings made from the channel serve it, and its mapping replaces any
   * other. A caller's import (import_tensor) may use any mapping cached, and its own is cached
   * only where the channel made none: a caller's wrong fd never becomes what the exporter's later
   * Publishes of the allocation (which come without the fd) read.
   */
  expected<std::shared_ptr<ImportedMapping>, Error> get(const TensorDescriptor& descriptor,
                                                        UniqueFd fd, int device, bool from_channel);
  /** @brief Takes allocation `id`'s mapping out of the cache (null when none), for the caller
   *         to drop outside its lock; with `channels_too` false, a mapping the channel made
   *         stays (only the exporter's word ends it). */
  std::shared_ptr<ImportedMapping> forget(std::uint64_t id, bool channels_too = true) noexcept;
  /** @brief Forgets every mapping; those imports still hold are unmapped when released. */
  void clear() noexcept {
    entries_.clear();
    fd_entries_[0] = 0;
    fd_entries_[1] = 0;
  }
  /** @brief Mappings cached. */
  std::size_t size() const noexcept { return entries_.size(); }
  /** @brief Mappings made so far (cached or not). */
  std::uint64_t opened() const noexcept { return opened_; }

 private:
  struct Entry {
    std::shared_ptr<ImportedMapping> mapping;
    MemoryHandleKind kind = MemoryHandleKind::kPosixFd;
    holoscan::detail::IpcHandleBytes handle{};
    std::uint64_t bytes = 0;
    std::uint64_t last_use = 0;
    bool from_channel = false;  // mapped from a Publish's fd or handle (the exporter's word)
  };
  // Evicts the least recently used entry of `kind`, of `side` only when given (made from the
  // channel or not), and only an idle one when `idle_only`; false when there is none.
  bool evict_oldest(MemoryHandleKind kind, std::optional<bool> side, bool idle_only) noexcept;
  void evict() noexcept;
  // Counts `entry` in (+1) or out (-1) of the kPosixFd entries of its side.
  void count_fd_entry(const Entry& entry, int change) noexcept;

  std::unordered_map<std::uint64_t, Entry> entries_;
  // kPosixFd entries among them: [0] made by callers' imports, [1] from the channel. Apart, so
  // that a caller's imports never push out a mapping the exporter counts as sent.
  std::size_t fd_entries_[2] = {};
  std::uint64_t clock_ = 0;
  std::uint64_t opened_ = 0;
};

}  // namespace holoscan::ipc::detail
