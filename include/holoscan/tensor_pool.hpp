#pragma once
/**
 * @file
 * @brief A stream-ordered pool of fixed-size blocks handed out as Tensors.
 */
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include <dlpack/dlpack.h>

#include "holoscan/cuda_handles.hpp"
#include "holoscan/dlpack.hpp"
#include "holoscan/expected.hpp"
#include "holoscan/export.hpp"
#include "holoscan/pool_memory.hpp"
#include "holoscan/tensor.hpp"

namespace holoscan {

namespace detail {
class HOLOSCAN_DLPACK_ABI PoolImpl;
}  // namespace detail

/** @brief Where a TensorPool takes its blocks from. */
enum class PoolMemory {
  kDevice,  ///< Device memory (cudaMalloc, or the config's provider); tensors report kDLCUDA.
  kHost,    ///< Pageable host memory; tensors report kDLCPU; works without a GPU.
};

/** @brief Shape of a TensorPool. */
struct HOLOSCAN_DLPACK_API TensorPoolConfig {
  PoolMemory memory = PoolMemory::kDevice;  ///< Kind of memory.
  int device = 0;                           ///< CUDA device for kDevice (ignored for kHost).
  std::size_t block_bytes = 0;              ///< Bytes of each block (rounded up to 256).
  std::size_t block_count = 0;              ///< Number of blocks, all allocated at creation.
  /**
   * @brief kDevice only: where the memory comes from; null means cudaMalloc. For tensors that go
   *        to other processes, ipc::shareable_pool_memory() (holoscan::dlpack_ipc) makes memory
   *        that an exporter shares without asking the driver per tensor.
   */
  std::shared_ptr<PoolMemoryProvider> memory_provider = nullptr;
};

/**
 * @brief Fixed-size blocks reused only when safe.
 *
 * A block comes back only when nothing names it any more (no Tensor, exported DLPack owner, copy
 * of its DLManagedTensorContext or of its memory reference; a surplus release_tensor_handle()
 * cannot fake that) and every deallocation point recorded on it, and the producer's readiness
 * point, has completed; completion is polled, never waited for. Each allocation owns its context
 * and memory reference under a shared ownership of its own: a std::weak_ptr to either expires
 * with that allocation, and never refers to a later allocation of the block (one to the memory
 * reference expires with its last std::shared_ptr even while an export still holds the block:
 * exports hold it apart, with one atomic). Once warm, allocate()
 * and the drop of its tensors take no heap memory (the ownerships' control blocks are recycled).
 * Pool tensors have writable authority. Record the producer's readiness with
 * Tensor::set_readiness_stream once the data is written (the "commit"). Tensors may outlive the
 * pool: the memory is freed once the last of them is gone and the GPU has passed their points.
 */
class HOLOSCAN_DLPACK_API TensorPool {
 public:
  /**
   * @brief Allocates every block up front; out of host memory, kResourceExhausted (never
   *        std::bad_alloc).
   */
  static expected<std::shared_ptr<TensorPool>, Error> create(const TensorPoolConfig& config);
  /**
   * @brief Frees the memory once the GPU passed every point on its blocks and no tensor names
   *        one: on the release thread while a point is pending, else at once. Device memory
   *        freed at once goes through cudaFree, which CUDA makes wait for the device's queued
   *        work; nothing else here waits for the GPU.
   */
  virtual ~TensorPool();
  TensorPool(const TensorPool&) = delete;
  TensorPool& operator=(const TensorPool&) = delete;

  /**
   * @brief A compact row-major tensor in a free block; kResourceExhausted ("pool exhausted", no
   *        heap allocation) at once if none is; kInvalidArgument if the request cannot fit a block.
   *        Out of host memory a refusal is kResourceExhausted, never std::bad_alloc.
   */
  expected<Tensor, Error> allocate(const std::int64_t* shape, std::int32_t ndim, DLDataType dtype);
  /** @brief As above, with the shape in a vector. */
  expected<Tensor, Error> allocate(const std::vector<std::int64_t>& shape, DLDataType dtype) {
    return allocate(shape.data(), ndim_of(shape), dtype);
  }
  /**
   * @brief Stream-ordered allocate for the producer stream `stream`: a block that nothing names
   *        is handed out even while the GPU still uses it, and `stream` is made to wait for every
   *        point recorded on the block (one cudaStreamWaitEvent each, none for a point recorded
   *        on `stream` itself), so work queued on `stream` afterwards may write it. The points
   *        stay until the new owner's first record on `stream` retires them, so that a block
   *        dropped unused still waits for its old readers (a default-stream handle, or more points
   *        than a block keeps inline, gets one point recorded on `stream` in their place instead).
   *        Record the readiness on `stream` (the usual producer does): a block whose new owner
   *        never records on `stream` keeps them beside its own points, and its fan-out past the
   *        inline room then takes the heap. No event query, no host wait. Only work on `stream`
   *        is ordered, on a host pool too: a host block's earlier readers (a copy out of it on
   *        another stream) may still read it, so a host writer synchronizes `stream` first, or
   *        takes blocks from allocate() without a stream, which hands out only idle ones.
   *        kResourceExhausted at once when every block is named, kNotImplemented for a stream
   *        that is capturing a graph, kFailure when a wait or the record fails, or when CUDA
   *        cannot tell whether `stream` is capturing (no driver: a host pool too; allocate()
   *        without a stream needs none).
   */
  expected<Tensor, Error> allocate(const std::int64_t* shape, std::int32_t ndim, DLDataType dtype,
                                   cudaStream_t stream);
  /** @brief As above, with the shape in a vector. */
  expected<Tensor, Error> allocate(const std::vector<std::int64_t>& shape, DLDataType dtype,
                                   cudaStream_t stream) {
    return allocate(shape.data(), ndim_of(shape), dtype, stream);
  }

  /** @brief Blocks that could be handed out now (polls deallocation points, never waits). */
  std::size_t available_blocks();
  /** @brief Total blocks. */
  std::size_t block_count() const noexcept;
  /** @brief Bytes per block. */
  std::size_t block_bytes() const noexcept;
  /** @brief Allocations that reused a block handed out before. */
  std::uint64_t reuse_count() const noexcept;
  /** @brief Device reported by the pool's tensors. */
  DLDevice device() const noexcept;

 private:
  friend class detail::PoolImpl;  // the one implementation: create() makes it
  TensorPool() = default;
  // A vector's length as an ndim: past int32 it stays past every limit (a cast would wrap it to a
  // small ndim and read the first extents only), so that allocate() refuses it.
  static std::int32_t ndim_of(const std::vector<std::int64_t>& shape) noexcept {
    return shape.size() > static_cast<std::size_t>(INT32_MAX)
               ? INT32_MAX
               : static_cast<std::int32_t>(shape.size());
  }
};

}  // namespace holoscan
