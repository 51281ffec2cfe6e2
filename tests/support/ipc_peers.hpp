#pragma once
// Building blocks of the cross-process tests on the fake runtimes: pools of device memory, an
// Exporter and an Importer connected in one process, and tensors over memory a test registered.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include <dlpack/dlpack.h>

#include "holoscan/ipc.hpp"
#include "holoscan/tensor.hpp"
#include "holoscan/tensor_pool.hpp"

namespace holoscan::test {

/** @brief float32, the element type of most cross-process tests. */
inline constexpr DLDataType kIpcFloat32{kDLFloat, 32, 1};

/** @brief Where a test pool's memory comes from. */
enum class PoolKind {
  kShareable,  ///< ipc::shareable_pool_memory(): VMM memory, exported as one fd.
  kCudaIpc,    ///< ipc::cuda_ipc_pool_memory(): cudaMalloc memory, one legacy handle per pool.
  kPlain,      ///< No provider: cudaMalloc memory the exporter knows nothing about.
};

/** @brief A device pool on the fake runtime; cudaMalloc memory is registered with the fake as
 *         legacy-IPC-capable device memory. */
std::shared_ptr<TensorPool> make_device_pool(std::size_t block_bytes, std::size_t blocks,
                                             PoolKind kind);

/** @brief A tensor from `pool` (fails the test when it cannot allocate). */
Tensor allocate(TensorPool& pool, const std::vector<std::int64_t>& shape,
                DLDataType dtype = kIpcFloat32);

/** @brief A Tensor over `data` (not owned) that says it lives on `device`. */
Tensor wrap_memory(void* data, const std::vector<std::int64_t>& shape, DLDevice device,
                   DLDataType dtype = kIpcFloat32);

/** @brief VMM memory exportable as a POSIX fd, made through the table in use, outside any pool. */
class VmmBuffer {
 public:
  /** @brief At least `bytes` on `device` (fails the test when it cannot). */
  VmmBuffer(std::size_t bytes, int device = 0);
  /** @brief Unmaps and releases it. */
  ~VmmBuffer();
  VmmBuffer(const VmmBuffer&) = delete;
  VmmBuffer& operator=(const VmmBuffer&) = delete;
  /** @brief Where it is mapped. */
  void* data() const noexcept { return data_; }
  /** @brief Its size (rounded up to the granularity). */
  std::size_t bytes() const noexcept { return bytes_; }

 private:
  void create(std::size_t bytes, int device);
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  unsigned long long handle_ = 0;
};

/** @brief An importer connected to `exporter` over Channel::pair() in this process. */
struct ConnectedImporter {
  ipc::PeerId peer = 0;                   ///< The importer as the exporter knows it.
  std::optional<ipc::Importer> importer;  ///< Empty when the connection failed.
};

/** @brief Connects a new importer to `exporter` (the Hello exchange runs on a helper thread). */
ConnectedImporter connect_importer(ipc::Exporter& exporter);
/** @brief As above, the Importer made with `options` (its Hello limit is taken from them). */
ConnectedImporter connect_importer(ipc::Exporter& exporter, const ipc::ImporterOptions& options);

/** @brief An Importer whose exporter is a bare channel end that sends what a test says. */
struct RawExporterLink {
  std::optional<ipc::Channel> raw;        ///< The exporter's end; empty when it failed.
  std::optional<ipc::Importer> importer;  ///< Empty likewise.
};

/** @brief A RawExporterLink, its Hello exchanged (fails the test when it cannot be made). */
RawExporterLink raw_exporter_link();

/** @brief A shareable pool, an Exporter, and one Importer connected to it in this process. */
struct LocalLink {
  std::shared_ptr<TensorPool> pool;       ///< Null when the link could not be made.
  std::optional<ipc::Exporter> exporter;  ///< Empty likewise.
  ipc::PeerId peer = 0;                   ///< The importer as the exporter knows it.
  std::optional<ipc::Importer> importer;  ///< Empty likewise.

  /** @brief Whether every part was made. */
  bool ok() const { return pool != nullptr && exporter && importer; }
};

/** @brief Importer options that wait for readiness `where`, the Hello limit `hello_timeout_ms`. */
ipc::ImporterOptions readiness_options(ipc::ReadinessWait where, int hello_timeout_ms = 5000);

/** @brief A LocalLink over a pool of `blocks` blocks of 1 KiB, its Importer made with `options`
 *         (fails the test when it cannot). */
LocalLink local_link(std::size_t blocks, const ipc::ImporterOptions& options = {});

/** @brief The next tensor `importer` receives within a second (fails the test otherwise). */
Tensor receive_one(ipc::Importer& importer);

/** @brief Polls `exporter` until `done()` holds or ten seconds pass; true if it held. */
template <class Predicate>
bool poll_until(ipc::Exporter& exporter, Predicate done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (;;) {
    (void)exporter.poll();
    if (done()) {
      return true;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return false;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

}  // namespace holoscan::test
