#include "holoscan/tensor_pool.hpp"

#include <atomic>
#include <mutex>
#include <new>
#include <string>

#include "dlpack/context_access.hpp"
#include "dlpack/dlpack_validate.hpp"
#include "dlpack/tensor_view.hpp"
#include "holoscan/stream_tracked_reference.hpp"
#include "pool/pool_memory.hpp"
#include "spin_mutex.hpp"
#include "stream/stream_point.hpp"
#include "stream/tracked_streams.hpp"

namespace holoscan {

namespace {

constexpr std::size_t kBlockAlignment = 256;

// A block's memory reference: its claims and stream points decide, with the use counts of its
// context and of itself, when the block is free again. It keeps the pool's memory alive, and
// lets go of it only once the GPU has passed every point recorded on the block. Exports to other
// processes learn the pool's allocation from it (pool_allocation()), without asking CUDA.
class PoolBlockReference final : public StreamTrackedReference {
 public:
  explicit PoolBlockReference(std::shared_ptr<PoolAllocation> memory) noexcept
      : memory_(std::move(memory)) {}
  ~PoolBlockReference() override {
    auto* held = new (std::nothrow) std::shared_ptr<PoolAllocation>(std::move(memory_));
    if (held == nullptr) {
      // No room to defer: wait here, since memory_ (kept) goes with this object.
      detail::StreamPointList points = streams().take_release_points();
      detail::wait_and_drop_points(points);
      return;
    }
    release_when_safe(
        [](void* context) noexcept {
          delete static_cast<std::shared_ptr<PoolAllocation>*>(context);
        },
        held);
  }
  PoolBlockReference(const PoolBlockReference&) = delete;
  PoolBlockReference& operator=(const PoolBlockReference&) = delete;

  // Whether no handle claim is held (an acquire load: see block_is_named).
  bool unclaimed() const noexcept { return handle_claims() == 0; }
  // Whether the GPU passed every point (polled, never waited for).
  bool points_passed() noexcept { return streams().poll_idle(); }
  // Forgets the previous tensor's streams before the block is handed out again.
  void recycle() noexcept { streams().reset(); }
  // Orders `stream` after every point, then forgets them (stream-ordered reuse).
  expected<void, Error> hand_over_to(cudaStream_t stream) noexcept {
    return streams().hand_over_to(stream);
  }

  // The pool's allocation, which this block lends from.
  PoolAllocation* memory() const noexcept { return memory_.get(); }

 private:
  detail::StreamState& streams() noexcept { return detail::tracked_streams(*this); }

  std::shared_ptr<PoolAllocation> memory_;
};

}  // namespace

namespace detail {

// What a TensorPool is: every TensorPool is one of these, made by create().
class HOLOSCAN_DLPACK_ABI PoolImpl final : public TensorPool {
 public:
  explicit PoolImpl(const TensorPoolConfig& config)
      : config_(config), blocks_(new Block[config.block_count]) {}

  // The implementation behind `pool`'s calls (no indirection: the same object).
  static PoolImpl& of(TensorPool& pool) noexcept { return static_cast<PoolImpl&>(pool); }
  static const PoolImpl& of(const TensorPool& pool) noexcept {
    return static_cast<const PoolImpl&>(pool);
  }

  expected<void, Error> allocate_memory();
  expected<Tensor, Error> allocate(const std::int64_t* shape, std::int32_t ndim, DLDataType dtype);
  expected<Tensor, Error> allocate(const std::int64_t* shape, std::int32_t ndim, DLDataType dtype,
                                   cudaStream_t stream);
  std::size_t available_blocks();
  DLDevice device() const noexcept;

  TensorPoolConfig config_;
  std::atomic<std::uint64_t> reuse_count_{0};

 private:
  struct Block {
    std::shared_ptr<DLManagedTensorContext> context;  // the pool's own reference
    PoolBlockReference* reference = nullptr;          // owned by context->memory_reference
    void* data = nullptr;
    bool handed_out = false;
  };

  expected<DLTensor, Error> judge_request(const std::int64_t* shape, std::int32_t ndim,
                                          DLDataType dtype, const char* who) const;
  Tensor hand_out(Block& block, std::size_t index, DLTensor& request);
  static bool block_is_named(Block& block) noexcept;
  static bool block_is_free(Block& block) noexcept;

  std::unique_ptr<Block[]> blocks_;
  SpinMutex mutex_;
  std::size_t cursor_ = 0;
};

}  // namespace detail

using detail::PoolImpl;

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
  if (config.memory == PoolMemory::kHost && config.memory_provider != nullptr) {
    return make_unexpected(ErrorCode::kInvalidArgument,
                           std::string(kWho) + ": only device memory comes from a memory provider");
  }
  if (config.memory == PoolMemory::kDevice && config.device < 0) {
    return make_unexpected(
        ErrorCode::kInvalidArgument,
        std::string(kWho) + ": device " + std::to_string(config.device) + " is negative");
  }
  std::shared_ptr<PoolImpl> pool;
  try {
    TensorPoolConfig rounded_config = config;
    rounded_config.block_bytes = rounded;
    pool = std::make_shared<PoolImpl>(rounded_config);
  } catch (...) {
    return make_unexpected(ErrorCode::kResourceExhausted,
                           std::string(kWho) + ": out of host memory");
  }
  if (auto memory = pool->allocate_memory(); !memory) {
    return forward_error(std::move(memory));
  }
  return pool;
}

// The blocks' contexts go with the pool unless a Tensor or an export still holds one; each
// block's reference then defers its share of the memory until the GPU is done with the block.
TensorPool::~TensorPool() = default;

expected<void, Error> PoolImpl::allocate_memory() {
  auto allocated = detail::allocate_pool_memory(config_, config_.block_bytes * config_.block_count);
  if (!allocated) {
    return forward_error(std::move(allocated));
  }
  try {
    std::shared_ptr<PoolAllocation> memory(std::move(*allocated));
    for (std::size_t i = 0; i < config_.block_count; ++i) {
      Block& block = blocks_[i];
      block.data = static_cast<char*>(memory->data()) + i * config_.block_bytes;
      block.context = std::make_shared<DLManagedTensorContext>();
      // Room for the largest shape up front, so that allocate() never needs the heap.
      block.context->dl_shape.reserve(kMaxTensorDims);
      block.context->dl_strides.reserve(kMaxTensorDims);
      auto reference = std::make_shared<PoolBlockReference>(memory);
      block.reference = reference.get();
      block.context->memory_reference = std::move(reference);
    }
  } catch (...) {
    return make_unexpected(ErrorCode::kResourceExhausted, "TensorPool::create: out of host memory");
  }
  return {};
}

namespace {

// Whether the pool's `owner` is the only one left, with this thread ordered after every access
// the others made through theirs. use_count() is a relaxed load (the reason shared_ptr::unique()
// was deprecated): seeing 1 orders nothing, and a holder of a copy of the context, which holds no
// claim, could still be reading the block while it is handed out anew. Copying and dropping the
// pool's own reference does order: the drop is an acquire-release decrement of the count, which
// reads from the (releasing) decrement of every holder gone.
template <class T>
bool only_owner(const std::shared_ptr<T>& owner) noexcept {
  if (owner.use_count() != 1) {
    return false;
  }
  const std::shared_ptr<T> synchronizes = owner;
  return true;
}

}  // namespace

// Only the pool may name the block: the use counts cannot be faked by a surplus release. A block
// whose reference was replaced through its context is never handed out again. The acquire load of
// the claim count orders this thread after every access the last Tensor or export made (each
// one's accesses come before its release of the claim); only_owner() after those of the holders
// of a copy of the context or of its memory reference.
bool PoolImpl::block_is_named(Block& block) noexcept {
  if (!block.handed_out) {
    return false;
  }
  const auto& reference = block.context->memory_reference;
  return !only_owner(block.context) || !only_owner(reference) ||
         reference.get() != block.reference || !block.reference->unclaimed();
}

bool PoolImpl::block_is_free(Block& block) noexcept {
  return !block_is_named(block) && (!block.handed_out || block.reference->points_passed());
}

expected<DLTensor, Error> PoolImpl::judge_request(const std::int64_t* shape, std::int32_t ndim,
                                                  DLDataType dtype, const char* who) const {
  // The request is judged before the blocks: a request that can never fit is kInvalidArgument
  // even while the pool is exhausted, so that callers retrying on exhaustion do not spin on it.
  auto layout = detail::validate_layout(ndim, shape, dtype, 0, who);
  if (!layout) {
    return forward_error(std::move(layout));
  }
  if (static_cast<std::uint64_t>(layout->nbytes) > config_.block_bytes) {
    return make_unexpected(ErrorCode::kInvalidArgument, std::string(who) + ": " +
                                                            std::to_string(layout->nbytes) +
                                                            " bytes do not fit a block of " +
                                                            std::to_string(config_.block_bytes));
  }
  DLTensor request{};
  request.device = device();
  request.ndim = ndim;
  request.dtype = dtype;
  request.shape = const_cast<std::int64_t*>(shape);  // read only: DLTensor has no const view
  return request;
}

// Under the lock, so that the block is named before another allocate looks at it.
Tensor PoolImpl::hand_out(Block& block, std::size_t index, DLTensor& request) {
  request.data = block.data;
  // Within the capacity reserved at creation: no allocation, nothing to throw.
  detail::assign_view(*block.context, request, 0,
                      DLPackVersion{DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION});
  detail::ContextAccess::restore_writable(*block.context);
  detail::ContextAccess::mark_checked(*block.context);  // judge_request checked the layout
  if (block.handed_out) {
    reuse_count_.fetch_add(1, std::memory_order_relaxed);
  }
  block.handed_out = true;
  cursor_ = index + 1;
  return Tensor(block.context);
}

expected<Tensor, Error> PoolImpl::allocate(const std::int64_t* shape, std::int32_t ndim,
                                           DLDataType dtype) {
  auto request = judge_request(shape, ndim, dtype, "TensorPool::allocate");
  if (!request) {
    return forward_error(std::move(request));
  }
  std::lock_guard<SpinMutex> lock(mutex_);
  for (std::size_t step = 0; step < config_.block_count; ++step) {
    const std::size_t index = (cursor_ + step) % config_.block_count;
    Block& block = blocks_[index];
    if (block_is_free(block)) {
      block.reference->recycle();
      return hand_out(block, index, *request);
    }
  }
  // Short enough to need no heap allocation: callers retry on this in loops.
  return make_unexpected(ErrorCode::kResourceExhausted, "pool exhausted");
}

expected<Tensor, Error> PoolImpl::allocate(const std::int64_t* shape, std::int32_t ndim,
                                           DLDataType dtype, cudaStream_t stream) {
  constexpr const char* kWho = "TensorPool::allocate";
  auto request = judge_request(shape, ndim, dtype, kWho);
  if (!request) {
    return forward_error(std::move(request));
  }
  // A wait on a capturing stream would be refused and would invalidate the capture.
  if (auto location = detail::locate_stream(stream); !location) {
    Error error = std::move(location.error());
    error.message = std::string(kWho) + ": " + error.message;
    return make_unexpected(std::move(error));
  }
  std::lock_guard<SpinMutex> lock(mutex_);
  for (std::size_t step = 0; step < config_.block_count; ++step) {
    const std::size_t index = (cursor_ + step) % config_.block_count;
    Block& block = blocks_[index];
    if (block_is_named(block)) {
      continue;
    }
    if (auto ordered = block.reference->hand_over_to(stream); !ordered) {
      Error error = std::move(ordered.error());
      error.message = std::string(kWho) + ": " + error.message;
      return make_unexpected(std::move(error));
    }
    return hand_out(block, index, *request);
  }
  return make_unexpected(ErrorCode::kResourceExhausted, "pool exhausted");
}

std::size_t PoolImpl::available_blocks() {
  std::lock_guard<SpinMutex> lock(mutex_);
  std::size_t available = 0;
  for (std::size_t i = 0; i < config_.block_count; ++i) {
    available += block_is_free(blocks_[i]) ? 1 : 0;
  }
  return available;
}

DLDevice PoolImpl::device() const noexcept {
  if (config_.memory == PoolMemory::kHost) {
    return DLDevice{kDLCPU, 0};
  }
  return DLDevice{kDLCUDA, config_.device};
}

expected<Tensor, Error> TensorPool::allocate(const std::int64_t* shape, std::int32_t ndim,
                                             DLDataType dtype) {
  return PoolImpl::of(*this).allocate(shape, ndim, dtype);
}

expected<Tensor, Error> TensorPool::allocate(const std::int64_t* shape, std::int32_t ndim,
                                             DLDataType dtype, cudaStream_t stream) {
  return PoolImpl::of(*this).allocate(shape, ndim, dtype, stream);
}

std::size_t TensorPool::available_blocks() { return PoolImpl::of(*this).available_blocks(); }

std::size_t TensorPool::block_count() const noexcept {
  return PoolImpl::of(*this).config_.block_count;
}

std::size_t TensorPool::block_bytes() const noexcept {
  return PoolImpl::of(*this).config_.block_bytes;
}

std::uint64_t TensorPool::reuse_count() const noexcept {
  return PoolImpl::of(*this).reuse_count_.load(std::memory_order_relaxed);
}

DLDevice TensorPool::device() const noexcept { return PoolImpl::of(*this).device(); }

PoolAllocation* pool_allocation(const TensorMemoryReference& reference) noexcept {
  const auto* block = dynamic_cast<const PoolBlockReference*>(&reference);
  return block != nullptr ? block->memory() : nullptr;
}

}  // namespace holoscan
