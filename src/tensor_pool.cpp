#include "holoscan/tensor_pool.hpp"

#include <cstdlib>
#include <mutex>
#include <new>
#include <string>

#include <cuda_runtime_api.h>

#include "cuda_error.hpp"
#include "deferred_release.hpp"
#include "device_guard.hpp"
#include "dlpack_validate.hpp"
#include "holoscan/stream_tracked_reference.hpp"
#include "stream_point.hpp"

namespace holoscan {
namespace {

constexpr std::size_t kBlockAlignment = 256;

// A block's memory reference: its claims and stream points decide when the block is free again.
class PoolBlockReference final : public StreamTrackedReference {
 public:
  // Free once no handle names the block and the GPU passed every point on it (polled).
  bool idle() noexcept { return claims_.count() == 0 && streams_.poll_idle(); }
  // Forgets the previous tensor's streams before the block is handed out again.
  void recycle() noexcept { streams_.reset(); }
  // Moves this block's points into `into`; a point that does not fit is waited for here.
  void move_points_to(detail::StreamPointList& into) noexcept {
    detail::StreamPointList points = streams_.take_release_points();
    for (std::size_t i = 0; i < points.size(); ++i) {
      if (!into.push_back(points[i])) {
        detail::StreamPointList single;
        single.push_back(points[i]);
        detail::wait_and_drop_points(single);
      }
    }
  }
};

// The pool's memory, freed by the release thread once the GPU is done with every block.
struct PoolMemoryRelease {
  void* memory;
  PoolMemory kind;
  int device;

  static void free_memory(void* memory, PoolMemory kind, int device) noexcept {
    if (memory == nullptr) {
      return;
    }
    if (kind == PoolMemory::kHost) {
      std::free(memory);
      return;
    }
    detail::DeviceGuard guard(device);
    if (detail::cuda().free(memory) != cudaSuccess) {
      (void)detail::cuda().get_last_error();
    }
  }

  static void run(void* context) noexcept {
    auto* release = static_cast<PoolMemoryRelease*>(context);
    free_memory(release->memory, release->kind, release->device);
    delete release;
  }
};

}  // namespace

struct TensorPool::Block {
  PoolBlockReference reference;
  detail::TensorContext context;
  void* data = nullptr;
  bool handed_out = false;
};

expected<std::shared_ptr<TensorPool>, Error> TensorPool::create(const TensorPoolConfig& config) {
  constexpr const char* kWho = "TensorPool::create";
  if (config.block_bytes == 0 || config.block_count == 0) {
    return make_unexpected(ErrorCode::kInvalidArgument,
                           std::string(kWho) + ": block_bytes and block_count must be > 0");
  }
  std::size_t total = 0;
  const std::size_t rounded =
      (config.block_bytes + kBlockAlignment - 1) / kBlockAlignment * kBlockAlignment;
  if (rounded < config.block_bytes || __builtin_mul_overflow(rounded, config.block_count, &total)) {
    return make_unexpected(ErrorCode::kInvalidArgument,
                           std::string(kWho) + ": block_bytes * block_count overflows");
  }
  if (config.memory == PoolMemory::kDevice && config.device < 0) {
    return make_unexpected(
        ErrorCode::kInvalidArgument,
        std::string(kWho) + ": device " + std::to_string(config.device) + " is negative");
  }
  std::shared_ptr<TensorPool> pool;
  try {
    TensorPoolConfig rounded_config = config;
    rounded_config.block_bytes = rounded;
    pool = std::make_shared<TensorPool>(Private{}, rounded_config);
  } catch (...) {
    return make_unexpected(ErrorCode::kResourceExhausted,
                           std::string(kWho) + ": out of host memory");
  }
  if (auto memory = pool->allocate_memory(); !memory) {
    return tl::unexpected<Error>(std::move(memory.error()));
  }
  return pool;
}

TensorPool::TensorPool(Private, const TensorPoolConfig& config)
    : config_(config), blocks_(new Block[config.block_count]) {}

TensorPool::~TensorPool() {
  // Every Tensor and export keeps the pool alive, so no claim is left; GPU work may be. The last
  // handle may be dropped on any thread (a consumer's deleter, say), so this never blocks.
  detail::StreamPointList points;
  for (std::size_t i = 0; i < config_.block_count; ++i) {
    blocks_[i].reference.move_points_to(points);
  }
  auto* release = new (std::nothrow) PoolMemoryRelease{memory_, config_.memory, config_.device};
  if (release == nullptr) {
    detail::wait_and_drop_points(points);
    PoolMemoryRelease::free_memory(memory_, config_.memory, config_.device);
  } else if (detail::drop_completed_points(points)) {
    PoolMemoryRelease::run(release);
  } else {
    detail::defer_release(std::move(points), &PoolMemoryRelease::run, release);
  }
  memory_ = nullptr;
}

expected<void, Error> TensorPool::allocate_memory() {
  const std::size_t total = config_.block_bytes * config_.block_count;
  if (config_.memory == PoolMemory::kHost) {
    memory_ = std::aligned_alloc(kBlockAlignment, total);
    if (memory_ == nullptr) {
      return make_unexpected(
          ErrorCode::kResourceExhausted,
          "TensorPool::create: host allocation of " + std::to_string(total) + " bytes failed");
    }
  } else {
    detail::DeviceGuard guard(config_.device);
    if (guard.status() != cudaSuccess) {
      return tl::unexpected<Error>(detail::cuda_error(guard.status(), guard.failed_call()));
    }
    if (cudaError_t status = detail::cuda().malloc(&memory_, total); status != cudaSuccess) {
      memory_ = nullptr;
      Error error = detail::cuda_error(status, "cudaMalloc");
      if (status == cudaErrorMemoryAllocation) {
        error.code = ErrorCode::kResourceExhausted;
      }
      return tl::unexpected<Error>(std::move(error));
    }
  }
  for (std::size_t i = 0; i < config_.block_count; ++i) {
    blocks_[i].data = static_cast<char*>(memory_) + i * config_.block_bytes;
    blocks_[i].context.memory = &blocks_[i].reference;
  }
  return {};
}

bool TensorPool::block_is_free(Block& block) noexcept {
  return !block.handed_out || block.reference.idle();
}

expected<Tensor, Error> TensorPool::allocate(const std::int64_t* shape, std::int32_t ndim,
                                             DLDataType dtype) {
  constexpr const char* kWho = "TensorPool::allocate";
  // The request is judged before the blocks: a request that can never fit is kInvalidArgument
  // even while the pool is exhausted, so that callers retrying on exhaustion do not spin on it.
  auto layout = detail::validate_layout(ndim, shape, dtype, 0, kWho);
  if (!layout) {
    return tl::unexpected<Error>(std::move(layout.error()));
  }
  if (static_cast<std::uint64_t>(layout->nbytes) > config_.block_bytes) {
    return make_unexpected(ErrorCode::kInvalidArgument, std::string(kWho) + ": " +
                                                            std::to_string(layout->nbytes) +
                                                            " bytes do not fit a block of " +
                                                            std::to_string(config_.block_bytes));
  }
  DLTensor request{};
  request.device = device();
  request.ndim = ndim;
  request.dtype = dtype;
  request.shape = const_cast<std::int64_t*>(shape);  // read only: DLTensor has no const view

  std::lock_guard<detail::SpinMutex> lock(mutex_);
  for (std::size_t step = 0; step < config_.block_count; ++step) {
    const std::size_t index = (cursor_ + step) % config_.block_count;
    Block& block = blocks_[index];
    if (!block_is_free(block)) {
      continue;
    }
    if (!block.context.reserve_dims(ndim)) {
      return make_unexpected(ErrorCode::kResourceExhausted,
                             std::string(kWho) + ": out of host memory");
    }
    request.data = block.data;
    detail::fill_context(request, *layout, 0, block.context);
    if (block.handed_out) {
      reuse_count_.fetch_add(1, std::memory_order_relaxed);
    }
    block.reference.recycle();
    block.handed_out = true;
    cursor_ = index + 1;
    // Built under the lock, so the block's first claim exists before another allocate looks.
    return Tensor(std::shared_ptr<detail::TensorContext>(shared_from_this(), &block.context));
  }
  // Short enough to need no heap allocation: callers retry on this in loops.
  return make_unexpected(ErrorCode::kResourceExhausted, "pool exhausted");
}

std::size_t TensorPool::available_blocks() {
  std::lock_guard<detail::SpinMutex> lock(mutex_);
  std::size_t available = 0;
  for (std::size_t i = 0; i < config_.block_count; ++i) {
    available += block_is_free(blocks_[i]) ? 1 : 0;
  }
  return available;
}

std::size_t TensorPool::block_count() const noexcept { return config_.block_count; }
std::size_t TensorPool::block_bytes() const noexcept { return config_.block_bytes; }
std::uint64_t TensorPool::reuse_count() const noexcept {
  return reuse_count_.load(std::memory_order_relaxed);
}

DLDevice TensorPool::device() const noexcept {
  if (config_.memory == PoolMemory::kHost) {
    return DLDevice{kDLCPU, 0};
  }
  return DLDevice{kDLCUDA, config_.device};
}

}  // namespace holoscan
