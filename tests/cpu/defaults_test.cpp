// Covers the documented defaults of TensorMemoryReference and the initial state of the owners.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <type_traits>

#include "holoscan/dlpack.hpp"
#include "holoscan/tensor.hpp"
#include "holoscan/tensor_memory_reference.hpp"
#include "support/counting_producer.hpp"
#include "support/gtest_printers.hpp"

namespace holoscan {
namespace {

using test::CountingProducer;

class PlainReference : public TensorMemoryReference {};

static_assert(!std::is_copy_constructible_v<TensorMemoryReference>);
static_assert(!std::is_copy_assignable_v<TensorMemoryReference>);
static_assert(std::has_virtual_destructor_v<TensorMemoryReference>);

// Any non-null pointer will do: the defaults must not touch the stream.
cudaStream_t some_stream() { return reinterpret_cast<cudaStream_t>(std::uintptr_t{0x1000}); }

TEST(TensorMemoryReferenceDefaults, RetainAndReleaseAreNoexceptNoOps) {
  PlainReference reference;
  static_assert(noexcept(reference.retain_tensor_handle()));
  static_assert(noexcept(reference.release_tensor_handle()));
  static_assert(noexcept(reference.tracks_deallocation_stream()));
  static_assert(noexcept(reference.has_readiness_stream_contract()));
  static_assert(noexcept(reference.readiness_stream()));
  reference.release_tensor_handle();  // unpaired: the default has nothing to count or break
  reference.retain_tensor_handle();
  EXPECT_FALSE(reference.has_readiness_stream_contract());
}

TEST(TensorMemoryReferenceDefaults, TensorOverPlainReferenceHasNoReadinessContract) {
  auto reference = std::make_shared<PlainReference>();
  auto context = std::make_shared<DLManagedTensorContext>();
  context->memory_reference = reference;
  Tensor tensor(context);
  {
    const Tensor copy = tensor;  // NOLINT(performance-unnecessary-copy-initialization)
    EXPECT_EQ(copy.memory_reference().get(), reference.get());
  }
  EXPECT_FALSE(tensor.set_readiness_stream(some_stream()));
  EXPECT_FALSE(tensor.has_readiness_stream_contract());
  const expected<void> consumer = tensor.synchronize_for_consumer_stream(some_stream());
  ASSERT_FALSE(consumer.has_value());
  EXPECT_EQ(consumer.error().code, ErrorCode::kNotImplemented);
  const expected<void> host = tensor.synchronize_for_host();
  ASSERT_FALSE(host.has_value());
  EXPECT_EQ(host.error().code, ErrorCode::kNotImplemented);
  EXPECT_FALSE(tensor.set_deallocation_stream(some_stream()));
}

TEST(TensorMemoryReferenceDefaults, DeallocationStreamIsNotTracked) {
  PlainReference reference;
  EXPECT_FALSE(reference.set_deallocation_stream(nullptr));
  EXPECT_FALSE(reference.set_deallocation_stream(some_stream()));
  EXPECT_FALSE(reference.tracks_deallocation_stream());
}

TEST(TensorMemoryReferenceDefaults, NoReadinessContract) {
  PlainReference reference;
  EXPECT_FALSE(reference.set_readiness_stream(nullptr));
  EXPECT_FALSE(reference.set_readiness_stream(some_stream()));
  EXPECT_FALSE(reference.has_readiness_stream_contract());
  EXPECT_EQ(reference.readiness_stream(), nullptr);
}

TEST(TensorMemoryReferenceDefaults, SynchronizationSucceedsWithoutWork) {
  PlainReference reference;
  EXPECT_TRUE(reference.synchronize_for_consumer(nullptr).has_value());
  EXPECT_TRUE(reference.synchronize_for_consumer(some_stream()).has_value());
  EXPECT_TRUE(reference.synchronize_for_host().has_value());
}

TEST(StreamTrackedDefaults, VersionedBufferStartsWithoutReadiness) {
  CountingProducer producer;
  const DLManagedMemoryBufferVersioned buffer(producer.make_versioned());
  EXPECT_TRUE(buffer.tracks_deallocation_stream());
  EXPECT_FALSE(buffer.has_readiness_stream_contract());
  EXPECT_EQ(buffer.readiness_stream(), nullptr);
  EXPECT_EQ(buffer.deallocation_point_count(), 0u);
  EXPECT_EQ(buffer.handle_claims(), 0);
}

TEST(StreamTrackedDefaults, LegacyBufferStartsWithoutReadiness) {
  CountingProducer producer;
  const DLManagedMemoryBuffer buffer(producer.make_legacy());
  EXPECT_TRUE(buffer.tracks_deallocation_stream());
  EXPECT_FALSE(buffer.has_readiness_stream_contract());
  EXPECT_EQ(buffer.readiness_stream(), nullptr);
  EXPECT_EQ(buffer.deallocation_point_count(), 0u);
  EXPECT_EQ(buffer.handle_claims(), 0);
}

TEST(StreamTrackedDefaults, NullBuffersReportTheSame) {
  const DLManagedMemoryBufferVersioned versioned(nullptr);
  const DLManagedMemoryBuffer legacy(nullptr);
  EXPECT_TRUE(versioned.tracks_deallocation_stream());
  EXPECT_FALSE(versioned.has_readiness_stream_contract());
  EXPECT_EQ(versioned.readiness_stream(), nullptr);
  EXPECT_TRUE(legacy.tracks_deallocation_stream());
  EXPECT_FALSE(legacy.has_readiness_stream_contract());
  EXPECT_EQ(legacy.readiness_stream(), nullptr);
}

}  // namespace
}  // namespace holoscan
