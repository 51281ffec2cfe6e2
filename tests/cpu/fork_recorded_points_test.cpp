// Covers owners and pool blocks that a forked child holds with stream points its parent recorded:
// a CUDA context does not survive fork(), so the child can neither ask about those points nor
// wait for them (the fake fails the query as CUDA does), and it must never take a failed query
// for "passed": the producer's deleter would run in the child, and a block would be handed out
// while the parent's GPU may still use it. Points the child records itself work as anywhere.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

#include "holoscan/deferred_release.hpp"
#include "holoscan/dlpack.hpp"
#include "holoscan/tensor_pool.hpp"
#include "support/counting_producer.hpp"
#include "support/fake_cuda_test.hpp"
#include "support/forked_child.hpp"
#include "support/gtest_printers.hpp"

namespace holoscan {
namespace {

using test::CountingProducer;
using test::CudaEntry;
using test::FakeCuda;


using Buffer = DLManagedMemoryBufferVersioned;

constexpr DLDataType kFloat32{kDLFloat, 32, 1};
constexpr std::chrono::seconds kChildLimit{20};

// The child's checks, reported through its exit status.
int run_forked(const std::function<int()>& child) { return test::run_forked(child, kChildLimit); }

class ForkRecordedPoints : public test::FakeCudaTest {
 protected:
  void SetUp() override {
#if defined(__SANITIZE_ADDRESS__)
    // As in release_thread_test.cpp: a release thread of the parent may be freeing memory at the
    // fork, and g++ 12's AddressSanitizer allocator is not fork-safe (a child can block in it).
    GTEST_SKIP() << "AddressSanitizer's allocator can deadlock a child forked mid-allocation";
#endif
    test::FakeCudaTest::SetUp();
  }

  // A device pool of `blocks` blocks of 1 KiB.
  std::shared_ptr<TensorPool> make_pool(std::size_t blocks) {
    auto pool = TensorPool::create({PoolMemory::kDevice, 0, 1024, blocks});
    EXPECT_TRUE(pool.has_value()) << pool.error().message;
    return pool.has_value() ? *pool : nullptr;
  }

  // A pool of one block, dropped with a deallocation point on `reader` (whose work stays
  // pending); null (the test failed) when that could not be set up.
  std::shared_ptr<TensorPool> pool_read_by(cudaStream_t reader) {
    auto pool = make_pool(1);
    if (pool == nullptr) {
      return nullptr;
    }
    auto block = pool->allocate({16}, kFloat32);
    EXPECT_TRUE(block.has_value()) << block.error().message;
    fake().launch(reader);
    if (!block.has_value() || !block->set_deallocation_stream(reader)) {
      ADD_FAILURE() << "the block's deallocation point was not recorded";
      return nullptr;
    }
    return pool;
  }

  // The parent records a deallocation point of an owner (pending, or done when `completed`); a
  // forked child drops its copy of the owner, flushes, lets every stream finish and flushes
  // again. The parent then drops its own and its deleter runs there, once.
  void drop_in_the_child(bool completed) {
    CountingProducer producer;
    cudaStream_t stream = fake().create_stream(0);
    auto buffer = std::make_unique<Buffer>(producer.make_versioned());
    fake().launch(stream);
    ASSERT_TRUE(buffer->set_deallocation_stream(stream));
    if (completed) {
      fake().complete(stream);
    }

    const int status = run_forked([&] {
      int failed = 0;
      const std::uint64_t queries = fake().calls(CudaEntry::kEventQuery);
      const std::uint64_t waits = fake().calls(CudaEntry::kEventSynchronize);
      buffer.reset();  // the child's copy: its point is the parent's
      flush_deferred_releases();
      if (producer.deleter_calls() != 0) failed |= 1;  // ran in the child (on "passed")
      if (pending_deferred_releases() != 0) failed |= 2;
      fake().complete_all();
      flush_deferred_releases();
      if (producer.deleter_calls() != 0) failed |= 4;
      // The parent's event is never asked about nor waited on here.
      if (fake().calls(CudaEntry::kEventQuery) != queries) failed |= 8;
      if (fake().calls(CudaEntry::kEventSynchronize) != waits) failed |= 16;
      return failed;
    });
    EXPECT_EQ(status, 0) << "-1: the child hung; otherwise the bits of the child's checks";

    EXPECT_EQ(producer.deleter_calls(), 0);
    buffer.reset();
    fake().complete(stream);
    flush_deferred_releases();
    EXPECT_EQ(producer.deleter_calls(), 1);
  }
};

TEST_F(ForkRecordedPoints, AChildDroppingAnOwnerWhosePendingPointTheParentRecordedRunsNoDeleter) {
  drop_in_the_child(false);
}

TEST_F(ForkRecordedPoints, AChildDroppingAnOwnerWhoseCompletedPointTheParentRecordedRunsNoDeleter) {
  drop_in_the_child(true);  // done on the parent's GPU, but the child cannot know it
}

TEST_F(ForkRecordedPoints, AChildNeverGetsABlockWhosePointTheParentRecorded) {
  cudaStream_t reader = fake().create_stream(0);
  auto pool = pool_read_by(reader);
  ASSERT_NE(pool, nullptr);

  const int status = run_forked([&] {
    int failed = 0;
    const std::uint64_t queries = fake().calls(CudaEntry::kEventQuery);
    auto again = pool->allocate({16}, kFloat32);
    if (again.has_value()) failed |= 1;  // handed out while the parent's GPU may read it
    if (!again.has_value() && again.error().code != ErrorCode::kResourceExhausted) failed |= 2;
    if (pool->available_blocks() != 0) failed |= 4;
    if (fake().calls(CudaEntry::kEventQuery) != queries) failed |= 8;
    return failed;
  });
  EXPECT_EQ(status, 0) << "-1: the child hung; otherwise the bits of the child's checks";

  EXPECT_EQ(pool->available_blocks(), 0u);  // the parent's reader still runs
  fake().complete(reader);
  auto again = pool->allocate({16}, kFloat32);
  EXPECT_TRUE(again.has_value()) << again.error().message;
}

TEST_F(ForkRecordedPoints, AChildsStreamOrderedAllocateRefusesABlockWhosePointTheParentRecorded) {
  cudaStream_t reader = fake().create_stream(0);
  auto pool = pool_read_by(reader);
  ASSERT_NE(pool, nullptr);

  const int status = run_forked([&] {
    int failed = 0;
    cudaStream_t producer = fake().create_stream(0);
    const std::uint64_t waits = fake().calls(CudaEntry::kStreamWaitEvent);
    auto again = pool->allocate({16}, kFloat32, producer);
    if (again.has_value()) failed |= 1;  // a wait on the parent's event cannot order it here
    if (!again.has_value() && again.error().code != ErrorCode::kResourceExhausted) failed |= 2;
    if (fake().calls(CudaEntry::kStreamWaitEvent) != waits) failed |= 4;
    return failed;
  });
  EXPECT_EQ(status, 0) << "-1: the child hung; otherwise the bits of the child's checks";

  cudaStream_t producer = fake().create_stream(0);
  auto again = pool->allocate({16}, kFloat32, producer);  // the parent orders it as before
  EXPECT_TRUE(again.has_value()) << again.error().message;
}

// The forking thread recorded in the parent: its records in the child are the child's own, asked
// about and waited for as usual (an owner's release runs once they pass, a block comes back).
TEST_F(ForkRecordedPoints, PointsTheChildRecordsAfterTheForkCompleteThere) {
  cudaStream_t reader = fake().create_stream(0);
  auto pool = make_pool(2);
  ASSERT_NE(pool, nullptr);
  {
    auto block = pool->allocate({16}, kFloat32);
    ASSERT_TRUE(block.has_value()) << block.error().message;
    fake().launch(reader);
    ASSERT_TRUE(block->set_deallocation_stream(reader));  // this thread recorded in the parent
  }

  const int status = run_forked([&] {
    int failed = 0;
    cudaStream_t own = fake().create_stream(0);
    CountingProducer producer;
    {
      Buffer buffer(producer.make_versioned());
      fake().launch(own);
      if (!buffer.set_deallocation_stream(own)) failed |= 1;
    }
    if (pending_deferred_releases() != 1) failed |= 2;
    fake().complete(own);
    flush_deferred_releases();
    if (producer.deleter_calls() != 1) failed |= 4;

    {
      auto block = pool->allocate({16}, kFloat32);  // the free block: the other is the parent's
      if (!block.has_value()) return failed | 8;
      fake().launch(own);
      if (!block->set_deallocation_stream(own)) failed |= 16;
    }
    if (pool->allocate({16}, kFloat32).has_value()) failed |= 32;  // both busy
    fake().complete(own);
    if (!pool->allocate({16}, kFloat32).has_value()) failed |= 64;  // the child's own passed
    return failed;
  });
  EXPECT_EQ(status, 0) << "-1: the child hung; otherwise the bits of the child's checks";

  fake().complete(reader);
  EXPECT_EQ(pool->available_blocks(), 2u);
}

}  // namespace
}  // namespace holoscan
