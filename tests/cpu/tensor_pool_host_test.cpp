// Covers TensorPool over host memory: creation, allocation, exhaustion, safe reuse, lifetime.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "counted_cuda_api.hpp"
#include "cuda/cuda_api.hpp"
#include "dlpack/recycler.hpp"
#include "holoscan/stream_tracked_reference.hpp"
#include "holoscan/tensor.hpp"
#include "holoscan/tensor_pool.hpp"
#include "support/allocation_hooks.hpp"
#include "support/gtest_printers.hpp"

namespace holoscan {
namespace {

constexpr DLDataType kFloat32{kDLFloat, 32, 1};

std::shared_ptr<TensorPool> make_host_pool(std::size_t block_bytes, std::size_t block_count) {
  TensorPoolConfig config;
  config.memory = PoolMemory::kHost;
  config.block_bytes = block_bytes;
  config.block_count = block_count;
  expected<std::shared_ptr<TensorPool>> pool = TensorPool::create(config);
  EXPECT_TRUE(pool.has_value()) << pool.error().message;
  return pool.has_value() ? *pool : nullptr;
}

Tensor allocate_or_die(TensorPool& pool, const std::vector<std::int64_t>& shape,
                       DLDataType dtype = kFloat32) {
  expected<Tensor> tensor = pool.allocate(shape, dtype);
  EXPECT_TRUE(tensor.has_value()) << tensor.error().message;
  return tensor.has_value() ? std::move(*tensor) : Tensor();
}

void expect_exhausted(TensorPool& pool) {
  const expected<Tensor> tensor = pool.allocate({4}, kFloat32);
  ASSERT_FALSE(tensor.has_value());
  EXPECT_EQ(tensor.error().code, ErrorCode::kResourceExhausted) << tensor.error().message;
}

TEST(TensorPoolHost, CreateReportsItsShape) {
  auto pool = make_host_pool(1024, 4);
  ASSERT_NE(pool, nullptr);
  EXPECT_EQ(pool->block_count(), 4u);
  EXPECT_EQ(pool->block_bytes(), 1024u);
  EXPECT_EQ(pool->available_blocks(), 4u);
  EXPECT_EQ(pool->reuse_count(), 0u);
  EXPECT_EQ(pool->device().device_type, kDLCPU);
}

TEST(TensorPoolHost, BlockBytesAreRoundedUpTo256) {
  auto pool = make_host_pool(1000, 2);
  ASSERT_NE(pool, nullptr);
  EXPECT_EQ(pool->block_bytes(), 1024u);
}

// Out of host memory, create() is kResourceExhausted whichever of its allocations the heap
// refuses, the rest of them refused too: it never throws, and a refused create leaves nothing
// behind. Before the fix the out-of-memory errors' own messages, built on the heap, threw
// std::bad_alloc out of create() (out of the very catch meant to report it).
TEST(TensorPoolHost, CreateOutOfHostMemoryIsResourceExhaustedWhateverAllocationFails) {
  TensorPoolConfig config;
  config.memory = PoolMemory::kHost;
  config.block_bytes = 1024;
  config.block_count = 4;
  for (std::uint64_t skip = 0;; ++skip) {
    bool threw = false;
    std::uint64_t refused = 0;
    expected<std::shared_ptr<TensorPool>> pool = make_unexpected(ErrorCode::kFailure, "unset");
    {
      test::FailingAllocations failing(skip, 1000);
      try {
        pool = TensorPool::create(config);
      } catch (...) {
        threw = true;
      }
      refused = failing.failed();
    }
    EXPECT_FALSE(threw) << "create() threw with allocation " << skip << " refused";
    if (refused == 0) {
      ASSERT_TRUE(pool.has_value()) << pool.error().message;
      EXPECT_EQ((*pool)->available_blocks(), 4u);
      break;
    }
    if (!threw) {
      ASSERT_FALSE(pool.has_value()) << "allocation " << skip;
      EXPECT_EQ(pool.error().code, ErrorCode::kResourceExhausted) << pool.error().message;
    }
  }
}

TEST(TensorPoolHost, ZeroBlockBytesIsInvalid) {
  TensorPoolConfig config;
  config.memory = PoolMemory::kHost;
  config.block_bytes = 0;
  config.block_count = 4;
  const expected<std::shared_ptr<TensorPool>> pool = TensorPool::create(config);
  ASSERT_FALSE(pool.has_value());
  EXPECT_EQ(pool.error().code, ErrorCode::kInvalidArgument);
}

TEST(TensorPoolHost, ZeroBlockCountIsInvalid) {
  TensorPoolConfig config;
  config.memory = PoolMemory::kHost;
  config.block_bytes = 1024;
  config.block_count = 0;
  const expected<std::shared_ptr<TensorPool>> pool = TensorPool::create(config);
  ASSERT_FALSE(pool.has_value());
  EXPECT_EQ(pool.error().code, ErrorCode::kInvalidArgument);
}

// A PoolMemory cast from an integer that names neither kind made a device pool (Python refused
// it already, row 199).
TEST(TensorPoolHost, AMemoryKindThatIsNeitherIsInvalid) {
  TensorPoolConfig config;
  config.memory = static_cast<PoolMemory>(7);
  config.block_bytes = 1024;
  config.block_count = 1;
  const expected<std::shared_ptr<TensorPool>> pool = TensorPool::create(config);
  ASSERT_FALSE(pool.has_value());
  EXPECT_EQ(pool.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(pool.error().message,
            "TensorPool::create: memory is neither PoolMemory::kDevice nor kHost");
}

TEST(TensorPoolHost, AllocateGivesCompactRowMajorHostTensor) {
  auto pool = make_host_pool(1024, 2);
  ASSERT_NE(pool, nullptr);
  const Tensor tensor = allocate_or_die(*pool, {4, 8, 2}, DLDataType{kDLInt, 16, 1});
  ASSERT_TRUE(static_cast<bool>(tensor));
  EXPECT_EQ(tensor.shape(), (std::vector<std::int64_t>{4, 8, 2}));
  EXPECT_EQ(tensor.strides(), (std::vector<std::int64_t>{32, 4, 2}));
  EXPECT_EQ(tensor.ndim(), 3);
  EXPECT_EQ(tensor.size(), 64);
  EXPECT_EQ(tensor.nbytes(), 128);
  EXPECT_EQ(tensor.dtype().code, kDLInt);
  EXPECT_EQ(tensor.dtype().bits, 16);
  EXPECT_EQ(tensor.dtype().lanes, 1);
  EXPECT_EQ(tensor.device().device_type, kDLCPU);
  EXPECT_TRUE(tensor.is_contiguous());
  EXPECT_NE(tensor.data(), nullptr);
  EXPECT_EQ(tensor.flags(), 0u);
  EXPECT_EQ(pool->available_blocks(), 1u);
}

// A host block that no stream point was recorded on is reused without a CUDA call: nothing to
// ask (the first call of a process may set the runtime up, a third of a second on the H200).
TEST(TensorPoolHost, ReusingBlocksWithoutPointsMakesNoCudaCall) {
  auto pool = make_host_pool(1024, 2);
  ASSERT_NE(pool, nullptr);
  const detail::CudaApi* previous = holoscan_bench::count_library_cuda_calls(&detail::cuda());
  const std::uint64_t before = holoscan_bench::library_calls_on_this_thread();
  for (int i = 0; i < 100; ++i) {
    const Tensor tensor = allocate_or_die(*pool, {4, 8}, DLDataType{kDLFloat, 32, 1});
    ASSERT_TRUE(static_cast<bool>(tensor));
  }
  const std::uint64_t calls = holoscan_bench::library_calls_on_this_thread() - before;
  detail::install_cuda_api(previous);
  EXPECT_EQ(calls, 0u);
  EXPECT_EQ(pool->reuse_count(), 98u);
}

TEST(TensorPoolHost, WholeBlockRequestFits) {
  auto pool = make_host_pool(1024, 1);
  ASSERT_NE(pool, nullptr);
  const Tensor tensor = allocate_or_die(*pool, {256});
  EXPECT_EQ(tensor.nbytes(), 1024);
}

TEST(TensorPoolHost, RequestLargerThanBlockIsInvalid) {
  auto pool = make_host_pool(1024, 2);
  ASSERT_NE(pool, nullptr);
  const expected<Tensor> tensor = pool->allocate({257}, kFloat32);
  ASSERT_FALSE(tensor.has_value());
  EXPECT_EQ(tensor.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(pool->available_blocks(), 2u);
}

// A caller that retries on kResourceExhausted would spin forever on a request that cannot fit.
TEST(TensorPoolHost, RequestLargerThanBlockIsInvalidEvenWhenExhausted) {
  auto pool = make_host_pool(256, 1);
  ASSERT_NE(pool, nullptr);
  const Tensor held = allocate_or_die(*pool, {8});
  const expected<Tensor> too_big = pool->allocate({65}, kFloat32);
  ASSERT_FALSE(too_big.has_value());
  EXPECT_EQ(too_big.error().code, ErrorCode::kInvalidArgument) << too_big.error().message;
  const expected<Tensor> negative = pool->allocate({-1}, kFloat32);
  ASSERT_FALSE(negative.has_value());
  EXPECT_EQ(negative.error().code, ErrorCode::kInvalidArgument) << negative.error().message;
}

TEST(TensorPoolHost, InvalidShapeOrTypeIsInvalid) {
  auto pool = make_host_pool(256, 1);
  ASSERT_NE(pool, nullptr);
  const expected<Tensor> negative = pool->allocate({-1}, kFloat32);
  ASSERT_FALSE(negative.has_value());
  EXPECT_EQ(negative.error().code, ErrorCode::kInvalidArgument);
  const expected<Tensor> zero_bits = pool->allocate({4}, DLDataType{kDLFloat, 0, 1});
  ASSERT_FALSE(zero_bits.has_value());
  EXPECT_EQ(zero_bits.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(pool->available_blocks(), 1u);
  EXPECT_EQ(pool->reuse_count(), 0u);
}

TEST(TensorPoolHost, ExhaustionIsReportedAtOnce) {
  auto pool = make_host_pool(256, 3);
  ASSERT_NE(pool, nullptr);
  std::vector<Tensor> held;
  for (int i = 0; i < 3; ++i) {
    held.push_back(allocate_or_die(*pool, {8}));
  }
  EXPECT_EQ(pool->available_blocks(), 0u);
  expect_exhausted(*pool);
  held.pop_back();
  EXPECT_EQ(pool->available_blocks(), 1u);
  EXPECT_TRUE(pool->allocate({8}, kFloat32).has_value());
}

TEST(TensorPoolHost, BlocksAreDistinct) {
  auto pool = make_host_pool(256, 3);
  ASSERT_NE(pool, nullptr);
  const Tensor a = allocate_or_die(*pool, {64});
  const Tensor b = allocate_or_die(*pool, {64});
  const Tensor c = allocate_or_die(*pool, {64});
  EXPECT_NE(a.data(), b.data());
  EXPECT_NE(b.data(), c.data());
  EXPECT_NE(a.data(), c.data());
}

TEST(TensorPoolHost, BlockReturnsOnlyAfterEveryCopyAndExportIsGone) {
  auto pool = make_host_pool(256, 1);
  ASSERT_NE(pool, nullptr);
  Tensor tensor = allocate_or_die(*pool, {16});
  Tensor copy = tensor;
  expected<DLManagedTensorVersioned*> exported = tensor.to_dlpack_versioned();
  ASSERT_TRUE(exported.has_value()) << exported.error().message;
  // The writable block's one mutable export is alive: a second, through the copy, is refused and
  // keeps nothing (Holoscan 5.0's rule).
  expected<DLManagedTensor*> refused = copy.to_dlpack();
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, ErrorCode::kNotSupported);

  tensor = Tensor();
  expect_exhausted(*pool);
  copy = Tensor();
  expect_exhausted(*pool);
  EXPECT_EQ(pool->available_blocks(), 0u);
  (*exported)->deleter(*exported);
  EXPECT_EQ(pool->available_blocks(), 1u);

  // The legacy form alone keeps the block the same way.
  tensor = allocate_or_die(*pool, {16});
  expected<DLManagedTensor*> legacy_export = tensor.to_dlpack();
  ASSERT_TRUE(legacy_export.has_value()) << legacy_export.error().message;
  tensor = Tensor();
  expect_exhausted(*pool);
  (*legacy_export)->deleter(*legacy_export);
  EXPECT_EQ(pool->available_blocks(), 1u);
  const expected<Tensor> again = pool->allocate({16}, kFloat32);
  EXPECT_TRUE(again.has_value()) << again.error().message;
  EXPECT_EQ(pool->reuse_count(), 2u);
}

// A surplus release is a caller bug; the pool must still not hand out a block that is named.
TEST(TensorPoolHost, SurplusReleaseCannotFreeANamedBlock) {
  auto pool = make_host_pool(256, 1);
  ASSERT_NE(pool, nullptr);
  const Tensor tensor = allocate_or_die(*pool, {16});
  tensor.memory_reference()->release_tensor_handle();  // the bug: one release too many
  tensor.memory_reference()->release_tensor_handle();
  EXPECT_EQ(pool->available_blocks(), 0u);
  auto refused = pool->allocate({16}, DLDataType{kDLFloat, 32, 1});
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, ErrorCode::kResourceExhausted);
  auto* stream_tracked = dynamic_cast<StreamTrackedReference*>(tensor.memory_reference().get());
  ASSERT_NE(stream_tracked, nullptr);
  EXPECT_EQ(stream_tracked->unpaired_releases(), 1u);  // reported, never wrapped
}

// The count of unpaired releases reports a holder's bug: it starts over when the block is lent
// anew, whose holder made none.
TEST(TensorPoolHost, AnEarlierHoldersUnpairedReleasesAreNotTheNextAllocations) {
  auto pool = make_host_pool(256, 1);
  ASSERT_NE(pool, nullptr);
  const TensorMemoryReference* first_reference = nullptr;
  {
    const Tensor tensor = allocate_or_die(*pool, {16});
    first_reference = tensor.memory_reference().get();
    tensor.release_handle();  // the bug: two releases too many
    tensor.release_handle();
  }
  ASSERT_EQ(pool->available_blocks(), 1u);
  const Tensor next = allocate_or_die(*pool, {16});
  auto* stream_tracked = dynamic_cast<StreamTrackedReference*>(next.memory_reference().get());
  ASSERT_NE(stream_tracked, nullptr);
  ASSERT_EQ(stream_tracked, first_reference);  // the same block, lent anew
  EXPECT_EQ(stream_tracked->unpaired_releases(), 0u);
  EXPECT_EQ(stream_tracked->handle_claims(), 1);
}

TEST(TensorPoolHost, HeldContextOrMemoryReferenceKeepsTheBlock) {
  auto pool = make_host_pool(256, 1);
  ASSERT_NE(pool, nullptr);
  std::shared_ptr<DLManagedTensorContext> context;
  std::shared_ptr<TensorMemoryReference> memory;
  {
    Tensor tensor = allocate_or_die(*pool, {16});
    context = tensor.dl_ctx();
    memory = tensor.memory_reference();
  }
  EXPECT_EQ(pool->available_blocks(), 0u);
  context.reset();
  EXPECT_EQ(pool->available_blocks(), 0u);
  memory.reset();
  EXPECT_EQ(pool->available_blocks(), 1u);
}

// A weak reference to what `name` takes from an allocation (its context or its memory reference)
// must expire with the allocation and stay expired once the block is handed out again: locking
// onto the next allocation would give another tensor's shape and data, and name the block.
template <class Name>
void expect_weak_expires_with_its_allocation(Name name) {
  auto pool = make_host_pool(256, 2);
  ASSERT_NE(pool, nullptr);
  Tensor tensor = allocate_or_die(*pool, {16});
  const void* block = tensor.data();
  std::weak_ptr weak(name(tensor));
  tensor = Tensor();
  EXPECT_TRUE(weak.expired());
  std::vector<Tensor> others;  // the other blocks, handed out on the way
  tensor = allocate_or_die(*pool, {4, 2});
  while (tensor.data() != block && others.size() < pool->block_count()) {
    others.push_back(std::move(tensor));
    tensor = allocate_or_die(*pool, {4, 2});
  }
  ASSERT_EQ(tensor.data(), block) << "the block did not come back";
  EXPECT_TRUE(weak.expired());
  EXPECT_EQ(weak.lock(), nullptr);
  tensor = Tensor();
  others.clear();
  EXPECT_EQ(pool->available_blocks(), 2u);
}

TEST(TensorPoolHost, AWeakContextExpiresWithItsAllocation) {
  expect_weak_expires_with_its_allocation([](const Tensor& tensor) { return tensor.dl_ctx(); });
}

TEST(TensorPoolHost, AWeakMemoryReferenceExpiresWithItsAllocation) {
  expect_weak_expires_with_its_allocation(
      [](const Tensor& tensor) { return tensor.memory_reference(); });
}

// A block whose memory reference was replaced through its context is never handed out again,
// even once every name of it is gone.
TEST(TensorPoolHost, ABlockWhoseReferenceWasReplacedIsNeverReused) {
  auto pool = make_host_pool(256, 2);
  ASSERT_NE(pool, nullptr);
  {
    Tensor tensor = allocate_or_die(*pool, {16});
    tensor.release_handle();  // the claim was taken on the reference about to be replaced
    tensor.dl_ctx()->memory_reference = std::make_shared<TensorMemoryReference>();
    tensor.retain_handle();
  }
  EXPECT_EQ(pool->available_blocks(), 1u);
  const Tensor other = allocate_or_die(*pool, {16});
  expect_exhausted(*pool);
}

// Outstanding tensors of every kind of block survive the pool: one still named, one whose
// reference alone is held, one named twice; each goes when its last name does (ASan checks).
TEST(TensorPoolHost, NamesOfEveryKindOutliveThePool) {
  auto pool = make_host_pool(256, 4);
  ASSERT_NE(pool, nullptr);
  Tensor tensor = allocate_or_die(*pool, {8}, DLDataType{kDLInt, 32, 1});
  static_cast<std::int32_t*>(tensor.data())[7] = 7;
  std::shared_ptr<TensorMemoryReference> reference = allocate_or_die(*pool, {8}).memory_reference();
  const Tensor named_twice = allocate_or_die(*pool, {8});
  std::shared_ptr<DLManagedTensorContext> context = named_twice.dl_ctx();
  std::weak_ptr<DLManagedTensorContext> weak = context;
  pool.reset();
  EXPECT_EQ(static_cast<const std::int32_t*>(tensor.data())[7], 7);
  tensor = Tensor();
  reference.reset();
  EXPECT_EQ(context->dl_shape[0], 8);
  EXPECT_FALSE(weak.expired());
}

#if HOLOSCAN_DLPACK_RECYCLE  // AddressSanitizer builds give recycled blocks to the heap
// Each allocation's ownerships take their control blocks from the recycler: once every block was
// handed out, an allocation and its drop take nothing from the heap, nor does exhaustion.
TEST(TensorPoolHost, AllocateAndDropTakeNoHeapMemoryOnceWarm) {
  auto pool = make_host_pool(256, 2);
  ASSERT_NE(pool, nullptr);
  const std::int64_t shape[] = {16};
  {
    const Tensor first = allocate_or_die(*pool, {16});
    const Tensor second = allocate_or_die(*pool, {16});
  }
  std::uint64_t calls = 0;
  bool allocated = true;
  bool exhausted = false;
  {
    test::NewCounter counter;
    for (int i = 0; i < 100; ++i) {
      expected<Tensor> a = pool->allocate(shape, 1, kFloat32);
      expected<Tensor> b = pool->allocate(shape, 1, kFloat32);
      allocated = allocated && a.has_value() && b.has_value();
      exhausted = !pool->allocate(shape, 1, kFloat32).has_value();
    }
    calls = counter.calls();
  }
  EXPECT_TRUE(allocated);
  EXPECT_TRUE(exhausted);
  EXPECT_EQ(calls, 0u);
}
#endif

// A control block that the heap refuses fails the allocation with kResourceExhausted and leaves
// the block free, whichever of the two it was (every allocation fails after the first `skip`).
// The context's vectors are public: a holder may put ones of less room in. The block's next
// allocation takes its room back where a refusal is an error (kResourceExhausted), not in the
// view's assignment, which must not throw.
TEST(TensorPoolHost, AContextWhoseVectorsAHolderShrankIsRefilledOrRefused) {
  auto pool = make_host_pool(4096, 1);
  ASSERT_NE(pool, nullptr);
  {
    Tensor tensor = allocate_or_die(*pool, {4});
    tensor.dl_ctx()->dl_shape = std::vector<std::int64_t>{4};
    tensor.dl_ctx()->dl_strides = std::vector<std::int64_t>{1};
  }
  const std::vector<std::int64_t> shape{2, 3, 4, 5, 6};
  bool threw = false;
  bool refused = false;
  ErrorCode code = ErrorCode::kSuccess;
  std::uint64_t failed = 0;
  {
    test::FailingAllocations failing(0, 1000);
    try {
      expected<Tensor> tensor = pool->allocate(shape, kFloat32);
      refused = !tensor.has_value();
      code = refused ? tensor.error().code : ErrorCode::kSuccess;
    } catch (...) {
      threw = true;
    }
    failed = failing.failed();
  }
  if (failed == 0) {
    GTEST_SKIP() << "this build does not make the heap refuse";
  }
  EXPECT_FALSE(threw) << "std::bad_alloc escaped allocate()";
  EXPECT_TRUE(refused);
  EXPECT_EQ(code, ErrorCode::kResourceExhausted);
  EXPECT_EQ(pool->available_blocks(), 1u);
  const Tensor again = allocate_or_die(*pool, shape);
  EXPECT_EQ(again.shape(), shape);
}

TEST(TensorPoolHost, ARefusedOwnershipLeavesTheBlockFree) {
  auto pool = make_host_pool(256, 1);
  ASSERT_NE(pool, nullptr);
  const std::int64_t shape[] = {16};
  std::vector<ErrorCode> refusals;
  refusals.reserve(8);
  std::size_t available_after_refusal = 1;
  // A thread of its own: its list of control blocks starts empty, so that the heap is asked.
  std::thread([&] {
    for (std::uint64_t skip = 0; skip < 8; ++skip) {
      std::uint64_t failed = 0;
      {
        test::FailingAllocations failing(skip, 1000);
        expected<Tensor> tensor = pool->allocate(shape, 1, kFloat32);
        if (!tensor.has_value()) {
          refusals.push_back(tensor.error().code);
        }
        failed = failing.failed();
      }
      available_after_refusal = std::min(available_after_refusal, pool->available_blocks());
      if (failed == 0) {
        return;
      }
    }
  }).join();
  if (refusals.empty()) {
    GTEST_SKIP() << "the recycler had control blocks to give: the heap refused nothing";
  }
  for (const ErrorCode code : refusals) {
    EXPECT_EQ(code, ErrorCode::kResourceExhausted);
  }
  EXPECT_EQ(available_after_refusal, 1u);
  const Tensor tensor = allocate_or_die(*pool, {16});
  EXPECT_EQ(pool->available_blocks(), 0u);
}

TEST(TensorPoolHost, ZeroSizeWithHugeExtentIsInvalid) {
  auto pool = make_host_pool(256, 1);
  ASSERT_NE(pool, nullptr);
  auto refused = pool->allocate({0, INT64_MAX}, DLDataType{kDLFloat, 32, 1});
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(refused.error().message.find("compact stride"), std::string::npos)
      << refused.error().message;
  const Tensor empty = allocate_or_die(*pool, {0, 1024});
  EXPECT_EQ(empty.strides(), (std::vector<std::int64_t>{4096, 4}));
  EXPECT_EQ(empty.nbytes(), 0);
}

TEST(TensorPoolHost, PoolTensorsAreWritable) {
  auto pool = make_host_pool(256, 1);
  ASSERT_NE(pool, nullptr);
  const Tensor tensor = allocate_or_die(*pool, {16});
  EXPECT_FALSE(tensor.is_read_only());
  DLManagedTensorVersioned* exported = tensor.to_dlpack_versioned().value();
  EXPECT_EQ(exported->flags & DLPACK_FLAG_BITMASK_READ_ONLY, 0u);
  auto reimported = make_tensor_from_dlpack_versioned(exported);
  ASSERT_TRUE(reimported.has_value()) << reimported.error().message;
  EXPECT_TRUE(reimported->is_read_only());  // a zero-copy import never gets writer authority
  EXPECT_FALSE(tensor.is_read_only());      // and the pool's own handle keeps it
}

TEST(TensorPoolHost, ReuseCountCountsOnlyReusedBlocks) {
  auto pool = make_host_pool(256, 2);
  ASSERT_NE(pool, nullptr);
  Tensor a = allocate_or_die(*pool, {4});
  Tensor b = allocate_or_die(*pool, {4});
  EXPECT_EQ(pool->reuse_count(), 0u);
  a = Tensor();
  a = allocate_or_die(*pool, {4});
  EXPECT_EQ(pool->reuse_count(), 1u);
  a = Tensor();
  b = Tensor();
  a = allocate_or_die(*pool, {4});
  b = allocate_or_die(*pool, {4});
  EXPECT_EQ(pool->reuse_count(), 3u);
}

TEST(TensorPoolHost, WriteThroughDataAndReadBack) {
  auto pool = make_host_pool(1024, 1);
  ASSERT_NE(pool, nullptr);
  const Tensor tensor = allocate_or_die(*pool, {16, 16}, DLDataType{kDLInt, 32, 1});
  auto* values = static_cast<std::int32_t*>(tensor.data());
  for (int i = 0; i < 256; ++i) {
    values[i] = i * i - 1000;
  }
  const Tensor copy = tensor;  // NOLINT(performance-unnecessary-copy-initialization)
  const auto* seen = static_cast<const std::int32_t*>(copy.data());
  for (int i = 0; i < 256; ++i) {
    ASSERT_EQ(seen[i], i * i - 1000) << "element " << i;
  }
}

// The pool object may go first; its memory stays with the Tensors (ASan checks the reads).
TEST(TensorPoolHost, OutstandingTensorsKeepTheMemoryAlive) {
  auto pool = make_host_pool(256, 2);
  ASSERT_NE(pool, nullptr);
  std::weak_ptr<TensorPool> weak_pool = pool;
  Tensor tensor = allocate_or_die(*pool, {8}, DLDataType{kDLInt, 32, 1});
  auto* values = static_cast<std::int32_t*>(tensor.data());
  for (int i = 0; i < 8; ++i) {
    values[i] = 40 + i;
  }

  pool.reset();
  EXPECT_TRUE(weak_pool.expired());
  const auto* seen = static_cast<const std::int32_t*>(tensor.data());
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(seen[i], 40 + i);
  }
  EXPECT_EQ(tensor.shape(), (std::vector<std::int64_t>{8}));
  tensor = Tensor();
}

TEST(TensorPoolHost, OutstandingExportKeepsTheMemoryAlive) {
  auto pool = make_host_pool(256, 1);
  ASSERT_NE(pool, nullptr);
  DLManagedTensorVersioned* exported = nullptr;
  {
    const Tensor tensor = allocate_or_die(*pool, {8});
    static_cast<float*>(tensor.data())[7] = 7.5f;
    expected<DLManagedTensorVersioned*> result = tensor.to_dlpack_versioned();
    ASSERT_TRUE(result.has_value()) << result.error().message;
    exported = *result;
  }
  pool.reset();
  EXPECT_EQ(exported->dl_tensor.shape[0], 8);
  EXPECT_EQ(static_cast<const float*>(exported->dl_tensor.data)[7], 7.5f);
  EXPECT_EQ(exported->flags & DLPACK_FLAG_BITMASK_READ_ONLY, 0u);  // pool tensors are writable
  exported->deleter(exported);
}

// Each thread fills its block with its own pattern and checks it before giving the block back:
// a block handed to two threads at once shows up as a foreign pattern.
TEST(TensorPoolHost, ConcurrentAllocateNeverSharesABlock) {
  constexpr int kThreads = 8;
  constexpr int kAllocationsPerThread = 400;
  constexpr std::int64_t kElements = 64;
  auto pool = make_host_pool(kElements * sizeof(std::uint32_t), 4);
  ASSERT_NE(pool, nullptr);
  {
    // Hand every block out once, so that each allocation below is a reuse.
    std::vector<Tensor> warm_up;
    for (int i = 0; i < 4; ++i) {
      warm_up.push_back(allocate_or_die(*pool, {kElements}));
    }
  }
  ASSERT_EQ(pool->reuse_count(), 0u);

  std::atomic<int> corrupted{0};
  std::atomic<int> wrong_error{0};
  std::atomic<int> exhausted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      int done = 0;
      while (done < kAllocationsPerThread) {
        expected<Tensor> tensor = pool->allocate({kElements}, DLDataType{kDLUInt, 32, 1});
        if (!tensor.has_value()) {
          if (tensor.error().code == ErrorCode::kResourceExhausted) {
            exhausted.fetch_add(1, std::memory_order_relaxed);
          } else {
            wrong_error.fetch_add(1, std::memory_order_relaxed);
          }
          std::this_thread::yield();
          continue;
        }
        auto* words = static_cast<std::uint32_t*>(tensor->data());
        const std::uint32_t pattern =
            (static_cast<std::uint32_t>(t) << 24) | static_cast<std::uint32_t>(done);
        for (std::int64_t i = 0; i < kElements; ++i) {
          words[i] = pattern;
        }
        std::this_thread::yield();
        for (std::int64_t i = 0; i < kElements; ++i) {
          if (words[i] != pattern) {
            corrupted.fetch_add(1, std::memory_order_relaxed);
            break;
          }
        }
        ++done;
      }
    });
  }
  for (std::thread& thread : threads) {
    thread.join();
  }

  EXPECT_EQ(corrupted.load(), 0);
  EXPECT_EQ(wrong_error.load(), 0);
  EXPECT_EQ(pool->available_blocks(), 4u);
  EXPECT_EQ(pool->reuse_count(), static_cast<std::uint64_t>(kThreads * kAllocationsPerThread));
}

}  // namespace
}  // namespace holoscan
