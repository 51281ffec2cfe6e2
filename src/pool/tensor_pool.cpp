#include "holoscan/tensor_pool.hpp"

#include <atomic>
#include <mutex>
#include <new>
#include <string>

#include "dlpack/context_access.hpp"
#include "dlpack/dlpack_validate.hpp"
#include "dlpack/recycler.hpp"
#include "dlpack/tensor_view.hpp"
#include "dlpack/without_throwing.hpp"
#include "holoscan/stream_tracked_reference.hpp"
#include "keep_until_exit.hpp"
#include "pool/pool_memory.hpp"
#include "spin_mutex.hpp"
#include "stream/reference_holds.hpp"
#include "stream/stream_point.hpp"
#include "stream/tracked_streams.hpp"

namespace holoscan {

namespace {

constexpr std::size_t kBlockAlignment = 256;

class PoolBlock;

// A block's memory reference: its claims and stream points decide, with the names of the block's
// allocation (see PoolBlock), when the block is free again. It keeps the pool's memory alive, and
// lets go of it only once the GPU has passed every point recorded on the block. Exports to other
// processes learn the pool's allocation from it (pool_allocation()), without asking CUDA. It
// lives by its holds (ReferenceHolds): an export keeps the block named with one atomic.
class PoolBlockReference final : public StreamTrackedReference {
 public:
  PoolBlockReference(std::shared_ptr<PoolAllocation> memory, PoolBlock* block) noexcept
      : memory_(std::move(memory)), block_(block) {}
  ~PoolBlockReference() override {
    auto* held = new (std::nothrow) std::shared_ptr<PoolAllocation>(std::move(memory_));
    if (held == nullptr) {
      // No room to defer: wait here, since memory_ (kept) goes with this object.
      detail::StreamPointList points = streams().take_release_points();
      if (!detail::wait_and_drop_points(points)) {
        // The parent's points (a forked child): its GPU may still use the memory, which must
        // outlive this object, and freeing it would call into CUDA here.
        detail::keep_until_exit(std::move(memory_));
      }
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
  // Whether a point was recorded by the parent before a fork() (see StreamState).
  bool points_of_another_process() noexcept { return streams().holds_points_of_another_process(); }
  // Forgets the previous tensor's streams before the block is handed out again.
  void recycle() noexcept { streams().reset(); }
  // Orders `stream` after every point, then keeps one point on it in their place (stream-ordered
  // reuse).
  expected<void, Error> hand_over_to(cudaStream_t stream,
                                     const detail::StreamLocation& location) noexcept {
    return streams().hand_over_to(stream, location);
  }

  // The pool's allocation, which this block lends from.
  PoolAllocation* memory() const noexcept { return memory_.get(); }
  // The block whose reference this is.
  PoolBlock* block() const noexcept { return block_; }

 private:
  detail::StreamState& streams() noexcept { return detail::tracked_streams(*this); }

  std::shared_ptr<PoolAllocation> memory_;
  PoolBlock* block_;
};

// One block of a pool: its memory, and the context and memory reference that every allocation of
// it reuses. Each allocation owns both through shared_ptrs of its own (control blocks from the
// recycler: once warm, nothing from the heap), whose deleters give the allocation's names back,
// so that a weak_ptr kept from one allocation expires with it and never locks onto the next. The
// reference's name goes with its last hold: the shared_ptr's, or an export's that outlives it.
// The pool owns the block while it lives; once it is gone, the last name of the block frees it.
class PoolBlock {
 public:
  PoolBlock(std::shared_ptr<PoolAllocation> memory, void* data)
      : reference_(std::move(memory), this), data_(data) {
    // Room for the largest shape up front, so that allocate() never needs the heap.
    context_.dl_shape.reserve(kMaxTensorDims);
    context_.dl_strides.reserve(kMaxTensorDims);
    // The reference lent with the context keeps the block named, and so its memory, on its own;
    // a reference a holder puts in its place does not (the block is then kept by the context).
    detail::ContextAccess::mark_memory_lives_by_holds_in(context_, reference_);
    detail::ReferenceHolds::live_by_holds(reference_, &reference_gone);
  }
  PoolBlock(const PoolBlock&) = delete;
  PoolBlock& operator=(const PoolBlock&) = delete;

  // Lends the context and the reference to a new allocation; null when the heap refuses.
  std::shared_ptr<DLManagedTensorContext> lend() noexcept;
  // Whether a name of the last allocation is still held, or the block was retired.
  bool named() const noexcept { return names_.load(std::memory_order_acquire) != 0; }
  // Drops the pool's ownership: the block goes now if nothing names it, else with its last name.
  static void abandon(PoolBlock* block) noexcept;

  // The block's memory reference, the same object for every allocation.
  PoolBlockReference& reference() noexcept { return reference_; }
  // The block's memory.
  void* data() const noexcept { return data_; }

  bool handed_out = false;  // guarded by the pool's lock

 private:
  // Deleter of an allocation's context.
  struct ContextGone {
    PoolBlock* block;
    void operator()(DLManagedTensorContext* /*context*/) const noexcept { block->context_gone(); }
  };
  // The last hold of an allocation's memory reference was given back.
  static void reference_gone(StreamTrackedReference* reference) noexcept {
    static_cast<PoolBlockReference*>(reference)->block()->unname();
  }

  void context_gone() noexcept;
  void unname() noexcept;

  // names_ counts the names of the last allocation still held (0 to 2), with these bits.
  static constexpr std::uint32_t kRetired = 1u << 30;   // its reference was replaced: never reused
  static constexpr std::uint32_t kOrphaned = 1u << 31;  // the pool is gone
  static constexpr std::uint32_t kNames = kRetired - 1;

  DLManagedTensorContext context_;
  PoolBlockReference reference_;
  void* data_;
  std::atomic<std::uint32_t> names_{0};
};

// Both names are counted at once (a plain store: nothing names the block, so nothing else writes
// the count now). A control block that the heap refuses runs its deleter at once, which gives a
// name back. The context's reference is set first, so that a refused context drops it too and is
// not taken for one whose reference was replaced.
std::shared_ptr<DLManagedTensorContext> PoolBlock::lend() noexcept {
  // The vectors are public: a holder of the last allocation may have put ones of less room in.
  // Their room comes back here, where a refusal is an error, and not in assign_view, which must
  // not throw (a no-op while the room is there).
  try {
    context_.dl_shape.reserve(kMaxTensorDims);
    context_.dl_strides.reserve(kMaxTensorDims);
  } catch (...) {  // std::bad_alloc: nothing named yet, the block stays free
    return nullptr;
  }
  names_.store(2, std::memory_order_relaxed);
  detail::StreamTrackedAccess::forget_unpaired_releases(reference_);  // nothing names it now
  // Again at each allocation: a holder's assignment to the last allocation's context forgot it.
  detail::ContextAccess::mark_memory_lives_by_holds_in(context_, reference_);
  detail::ReferenceHolds::hold_again(reference_);  // the shared_ptr's, given back by DropHold
  try {
    context_.memory_reference =
        std::shared_ptr<TensorMemoryReference>(&reference_, detail::ReferenceHolds::DropHold{},
                                               detail::RecyclingAllocator<PoolBlockReference>{});
  } catch (...) {  // std::bad_alloc: the reference's name is back, the context's never lent
    unname();
    return nullptr;
  }
  try {
    return std::shared_ptr<DLManagedTensorContext>(
        &context_, ContextGone{this}, detail::RecyclingAllocator<DLManagedTensorContext>{});
  } catch (...) {  // std::bad_alloc: the context's deleter gave both names back
    return nullptr;
  }
}

// The last holder of the allocation's context let go: the context's reference goes with it (the
// allocation's own, or one set in its place, which retires the block: the names and claims no
// longer tell who may use its memory).
void PoolBlock::context_gone() noexcept {
  if (context_.memory_reference.get() != &reference_) {
    names_.fetch_or(kRetired, std::memory_order_relaxed);  // published by unname()'s release
  }
  context_.memory_reference.reset();
  unname();
}

// Nothing of the block may be touched after the decrement: the pool may hand it out at once.
// Release: the pool's acquire load that reads zero orders its reuse after every holder's
// accesses (each holder's drop of a shared_ptr comes before the deleter that runs after the last
// one). Acquire: the thread that frees an orphan is ordered after them likewise.
void PoolBlock::unname() noexcept {
  const std::uint32_t before = names_.fetch_sub(1, std::memory_order_acq_rel);
  if ((before & (kOrphaned | kNames)) == (kOrphaned | 1)) {
    delete this;
  }
}

// One read-modify-write on each side: whichever of the pool and the last name comes second
// frees the block, ordered after the other.
void PoolBlock::abandon(PoolBlock* block) noexcept {
  const std::uint32_t before = block->names_.fetch_or(kOrphaned, std::memory_order_acq_rel);
  if ((before & kNames) == 0) {
    delete block;
  }
}

}  // namespace

namespace detail {

// What a TensorPool is: every TensorPool is one of these, made by create().
class HOLOSCAN_DLPACK_ABI PoolImpl final : public TensorPool {
 public:
  explicit PoolImpl(const TensorPoolConfig& config)
      : config_(config), blocks_(new PoolBlock*[config.block_count]()) {}
  ~PoolImpl() override;
  PoolImpl(const PoolImpl&) = delete;
  PoolImpl& operator=(const PoolImpl&) = delete;

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
  expected<DLTensor, Error> judge_request(const std::int64_t* shape, std::int32_t ndim,
                                          DLDataType dtype, const char* who) const;
  Tensor hand_out(PoolBlock& block, std::size_t index,
                  std::shared_ptr<DLManagedTensorContext> context, DLTensor& request);
  static bool block_is_named(PoolBlock& block) noexcept;
  static bool block_is_free(PoolBlock& block) noexcept;

  // Each one owned by the pool until abandoned (see PoolBlock); null where creation stopped.
  std::unique_ptr<PoolBlock*[]> blocks_;
  SpinMutex mutex_;
  std::size_t cursor_ = 0;
};

}  // namespace detail

using detail::PoolImpl;

namespace {

expected<std::shared_ptr<TensorPool>, Error> create_pool(const TensorPoolConfig& config) {
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
  if (config.memory != PoolMemory::kDevice && config.memory != PoolMemory::kHost) {
    // A value cast from an integer (a binding, a file) named neither: it made a device pool.
    return make_unexpected(ErrorCode::kInvalidArgument,
                           std::string(kWho) + ": memory is neither PoolMemory::kDevice nor kHost");
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

}  // namespace

// Out of host memory, the errors' own messages need the heap too: kResourceExhausted without a
// message then, never std::bad_alloc. (What a caller's memory provider throws is its own.)
expected<std::shared_ptr<TensorPool>, Error> TensorPool::create(const TensorPoolConfig& config) {
  try {
    return create_pool(config);
  } catch (const std::bad_alloc&) {
    return detail::out_of_memory();
  }
}

TensorPool::~TensorPool() = default;

// A block that something still names goes with its last name instead; each block's reference
// defers its share of the memory until the GPU is done with the block.
PoolImpl::~PoolImpl() {
  for (std::size_t i = 0; i < config_.block_count; ++i) {
    if (blocks_[i] != nullptr) {
      PoolBlock::abandon(blocks_[i]);
    }
  }
}

expected<void, Error> PoolImpl::allocate_memory() {
  auto allocated = detail::allocate_pool_memory(config_, config_.block_bytes * config_.block_count);
  if (!allocated) {
    return forward_error(std::move(allocated));
  }
  try {
    std::shared_ptr<PoolAllocation> memory(std::move(*allocated));
    for (std::size_t i = 0; i < config_.block_count; ++i) {
      blocks_[i] =
          new PoolBlock(memory, static_cast<char*>(memory->data()) + i * config_.block_bytes);
    }
  } catch (...) {
    return make_unexpected(ErrorCode::kResourceExhausted, "TensorPool::create: out of host memory");
  }
  return {};
}

// Only the pool may name the block: the names are counted by the deleters of the allocation's
// own shared_ptrs, which no surplus release can reach, and a block whose reference was replaced
// through its context is never handed out again. The acquire load of the names orders this
// thread after every access made through a Tensor, an export or a copy of the context or of the
// memory reference (see PoolBlock::unname); that of the claim count after those of a Tensor or
// export whose claim was released late (each one's accesses come before its release).
bool PoolImpl::block_is_named(PoolBlock& block) noexcept {
  return block.named() || !block.reference().unclaimed();
}

bool PoolImpl::block_is_free(PoolBlock& block) noexcept {
  return !block_is_named(block) && (!block.handed_out || block.reference().points_passed());
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

// Under the lock, with `context` lent by the block (which names it before another allocate looks).
Tensor PoolImpl::hand_out(PoolBlock& block, std::size_t index,
                          std::shared_ptr<DLManagedTensorContext> context, DLTensor& request) {
  request.data = block.data();
  // Within the capacity reserved at creation: no allocation, nothing to throw.
  detail::assign_view(*context, request, 0,
                      DLPackVersion{DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION});
  detail::ContextAccess::restore_writable(*context);
  detail::ContextAccess::mark_checked(*context);  // judge_request checked the layout
  if (block.handed_out) {
    reuse_count_.fetch_add(1, std::memory_order_relaxed);
  }
  block.handed_out = true;
  cursor_ = index + 1;
  return Tensor(std::move(context));
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
    PoolBlock& block = *blocks_[index];
    if (!block_is_free(block)) {
      continue;
    }
    std::shared_ptr<DLManagedTensorContext> context = block.lend();
    if (context == nullptr) {
      return make_unexpected(ErrorCode::kResourceExhausted, "out of memory");
    }
    block.reference().recycle();
    return hand_out(block, index, std::move(context), *request);
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
  auto location = detail::locate_stream(stream);
  if (!location) {
    Error error = std::move(location.error());
    error.message = std::string(kWho) + ": " + error.message;
    return make_unexpected(std::move(error));
  }
  std::lock_guard<SpinMutex> lock(mutex_);
  for (std::size_t step = 0; step < config_.block_count; ++step) {
    const std::size_t index = (cursor_ + step) % config_.block_count;
    PoolBlock& block = *blocks_[index];
    // A block the parent's GPU may still use (a forked child) is never handed out here: its
    // wait cannot be ordered, and refusing it leaves the pool exhausted rather than unsafe.
    if (block_is_named(block) || block.reference().points_of_another_process()) {
      continue;
    }
    // Lent before the points are handed over: a refusal then leaves them on the block.
    std::shared_ptr<DLManagedTensorContext> context = block.lend();
    if (context == nullptr) {
      return make_unexpected(ErrorCode::kResourceExhausted, "out of memory");
    }
    if (auto ordered = block.reference().hand_over_to(stream, *location); !ordered) {
      Error error = std::move(ordered.error());
      error.message = std::string(kWho) + ": " + error.message;
      return make_unexpected(std::move(error));  // the context's drop gives the names back
    }
    return hand_out(block, index, std::move(context), *request);
  }
  // Short enough to need no heap allocation: callers retry on this in loops.
  return make_unexpected(ErrorCode::kResourceExhausted, "pool exhausted");
}

std::size_t PoolImpl::available_blocks() {
  std::lock_guard<SpinMutex> lock(mutex_);
  std::size_t available = 0;
  for (std::size_t i = 0; i < config_.block_count; ++i) {
    available += block_is_free(*blocks_[i]) ? 1 : 0;
  }
  return available;
}

DLDevice PoolImpl::device() const noexcept {
  if (config_.memory == PoolMemory::kHost) {
    return DLDevice{kDLCPU, 0};
  }
  return DLDevice{kDLCUDA, config_.device};
}

// A refusal's message is built on the heap: out of host memory, the refusal is kResourceExhausted
// without one, never std::bad_alloc. Whatever threw had unwound first (a block lent meanwhile
// got its names back, its points untouched).
expected<Tensor, Error> TensorPool::allocate(const std::int64_t* shape, std::int32_t ndim,
                                             DLDataType dtype) {
  try {
    return PoolImpl::of(*this).allocate(shape, ndim, dtype);
  } catch (const std::bad_alloc&) {
    return detail::out_of_memory();
  }
}

expected<Tensor, Error> TensorPool::allocate(const std::int64_t* shape, std::int32_t ndim,
                                             DLDataType dtype, cudaStream_t stream) {
  try {
    return PoolImpl::of(*this).allocate(shape, ndim, dtype, stream);
  } catch (const std::bad_alloc&) {
    return detail::out_of_memory();
  }
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
