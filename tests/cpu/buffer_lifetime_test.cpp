// Covers the DLPack owners' lifetime: the producer's deleter runs exactly once, or never if null.
#include <gtest/gtest.h>

#include <memory>
#include <thread>
#include <type_traits>

#include "holoscan/deferred_release.hpp"
#include "holoscan/dlpack.hpp"
#include "support/counting_producer.hpp"

namespace holoscan {
namespace {

using test::CountingProducer;
using test::TensorSpec;

static_assert(!std::is_copy_constructible_v<DLManagedMemoryBufferVersioned>);
static_assert(!std::is_copy_assignable_v<DLManagedMemoryBufferVersioned>);
static_assert(!std::is_copy_constructible_v<DLManagedMemoryBuffer>);
static_assert(!std::is_copy_assignable_v<DLManagedMemoryBuffer>);
static_assert(std::is_base_of_v<TensorMemoryReference, DLManagedMemoryBufferVersioned>);
static_assert(std::is_base_of_v<TensorMemoryReference, DLManagedMemoryBuffer>);

TEST(BufferLifetime, VersionedDeleterRunsOnceOnDestruction) {
  CountingProducer producer;
  DLManagedTensorVersioned* managed = producer.make_versioned();
  {
    const DLManagedMemoryBufferVersioned buffer(managed);
    EXPECT_EQ(buffer.managed_tensor(), managed);
    EXPECT_EQ(producer.deleter_calls(), 0);
  }
  EXPECT_EQ(producer.deleter_calls(), 1);
  EXPECT_EQ(producer.last_deleter_thread(), std::this_thread::get_id());
}

TEST(BufferLifetime, LegacyDeleterRunsOnceOnDestruction) {
  CountingProducer producer;
  DLManagedTensor* managed = producer.make_legacy();
  {
    const DLManagedMemoryBuffer buffer(managed);
    EXPECT_EQ(buffer.managed_tensor(), managed);
    EXPECT_EQ(producer.deleter_calls(), 0);
  }
  EXPECT_EQ(producer.deleter_calls(), 1);
  EXPECT_EQ(producer.last_deleter_thread(), std::this_thread::get_id());
}

TEST(BufferLifetime, NullSelfOwnsNothing) {
  {
    const DLManagedMemoryBufferVersioned versioned(nullptr);
    const DLManagedMemoryBuffer legacy(nullptr);
    EXPECT_EQ(versioned.managed_tensor(), nullptr);
    EXPECT_EQ(legacy.managed_tensor(), nullptr);
  }
  EXPECT_EQ(pending_deferred_releases(), 0u);
}

TEST(BufferLifetime, NullDeleterIsNeverCalled) {
  CountingProducer producer;
  TensorSpec spec;
  spec.null_deleter = true;
  DLManagedTensorVersioned* versioned = producer.make_versioned(spec);
  DLManagedTensor* legacy = producer.make_legacy(spec);
  ASSERT_EQ(versioned->deleter, nullptr);
  ASSERT_EQ(legacy->deleter, nullptr);
  {
    const DLManagedMemoryBufferVersioned versioned_buffer(versioned);
    const DLManagedMemoryBuffer legacy_buffer(legacy);
  }
  EXPECT_EQ(producer.deleter_calls(), 0);
  EXPECT_EQ(pending_deferred_releases(), 0u);
}

TEST(BufferLifetime, DestroyedThroughSharedPtrToBase) {
  CountingProducer producer;
  std::shared_ptr<TensorMemoryReference> versioned =
      std::make_shared<DLManagedMemoryBufferVersioned>(producer.make_versioned());
  std::shared_ptr<TensorMemoryReference> legacy =
      std::make_shared<DLManagedMemoryBuffer>(producer.make_legacy());
  std::shared_ptr<TensorMemoryReference> second_owner = versioned;
  versioned.reset();
  EXPECT_EQ(producer.deleter_calls(), 0);
  second_owner.reset();
  EXPECT_EQ(producer.deleter_calls(), 1);
  legacy.reset();
  EXPECT_EQ(producer.deleter_calls(), 2);
}

TEST(BufferLifetime, EachBufferRunsItsOwnDeleter) {
  CountingProducer first;
  CountingProducer second;
  {
    const DLManagedMemoryBufferVersioned a(first.make_versioned());
    const DLManagedMemoryBufferVersioned b(second.make_versioned());
    const DLManagedMemoryBuffer c(second.make_legacy());
  }
  EXPECT_EQ(first.deleter_calls(), 1);
  EXPECT_EQ(second.deleter_calls(), 2);
}

TEST(BufferLifetime, DestroyedOnAnotherThreadRunsDeleterThere) {
  CountingProducer producer;
  auto buffer = std::make_unique<DLManagedMemoryBufferVersioned>(producer.make_versioned());
  std::thread::id destroyer;
  std::thread thread([&buffer, &destroyer] {
    destroyer = std::this_thread::get_id();
    buffer.reset();
  });
  thread.join();
  EXPECT_EQ(producer.deleter_calls(), 1);
  EXPECT_EQ(producer.last_deleter_thread(), destroyer);
}

TEST(DeferredRelease, FlushWithNothingPendingReturns) {
  EXPECT_EQ(pending_deferred_releases(), 0u);
  flush_deferred_releases();
  EXPECT_EQ(pending_deferred_releases(), 0u);
}

TEST(DeferredRelease, HostOnlyBuffersDeferNothing) {
  CountingProducer producer;
  { const DLManagedMemoryBufferVersioned buffer(producer.make_versioned()); }
  EXPECT_EQ(producer.deleter_calls(), 1);
  EXPECT_EQ(pending_deferred_releases(), 0u);
  flush_deferred_releases();
  EXPECT_EQ(producer.deleter_calls(), 1);
}

}  // namespace
}  // namespace holoscan
