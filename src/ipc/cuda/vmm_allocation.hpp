#pragma once
// Device memory through the CUDA virtual memory management (VMM) API: a physical allocation that
// can be exported as a POSIX file descriptor, reserved, mapped and made accessible in this
// process. Shareable TensorPools allocate it; importers map what another process exported.
#include <unistd.h>

#include <cstddef>
#include <memory>

#include <cuda.h>

#include "holoscan/expected.hpp"
#include "holoscan/export.hpp"
#include "holoscan/ipc/fd.hpp"

namespace holoscan::detail {

/** @brief One VMM allocation mapped into this process; unmapped and released when destroyed. */
class HOLOSCAN_DLPACK_ABI VmmAllocation {
 public:
  /**
   * @brief At least `bytes` of device memory on `device` (rounded up to the allocation
   *        granularity), exportable as a POSIX file descriptor, readable and writable here.
   */
  static expected<std::unique_ptr<VmmAllocation>, Error> create(int device, std::size_t bytes);

  /**
   * @brief Maps the `bytes`-byte allocation that another process exported as `fd` on `device`.
   *
   * The mapping is read-only where the driver allows it (imports have read-only authority, so a
   * stray write faults instead of corrupting the exporter's data), read-write otherwise. `fd`
   * stays the caller's.
   */
  static expected<std::unique_ptr<VmmAllocation>, Error> import(int fd, std::size_t bytes,
                                                                int device);

  /** @brief Unmaps, frees the address range and releases the handle (errors are swallowed). */
  ~VmmAllocation();
  VmmAllocation(const VmmAllocation&) = delete;
  VmmAllocation& operator=(const VmmAllocation&) = delete;

  /** @brief Where the allocation is mapped in this process. */
  void* base() const noexcept { return reinterpret_cast<void*>(base_); }
  /** @brief Bytes mapped (the whole allocation). */
  std::size_t bytes() const noexcept { return bytes_; }
  /** @brief The device the memory lives on. */
  int device() const noexcept { return device_; }
  /** @brief Whether the device may only read the mapping. */
  bool read_only() const noexcept { return read_only_; }

  /** @brief A new POSIX file descriptor for the allocation; the caller owns it. */
  expected<ipc::UniqueFd, Error> export_fd() const;

 private:
  explicit VmmAllocation(int device) noexcept : device_(device) {}
  expected<void, Error> map(std::size_t bytes, bool prefer_read_only);

  CUmemGenericAllocationHandle handle_ = 0;
  bool has_handle_ = false;
  CUdeviceptr base_ = 0;
  std::size_t bytes_ = 0;
  bool reserved_ = false;
  bool mapped_ = false;
  bool read_only_ = false;
  int device_ = 0;
  pid_t maker_ = ::getpid();  // a forked child's copy frees nothing (CUDA is unusable there)
};

}  // namespace holoscan::detail
