// Covers the Tensor handle: claims through copy/move/assign/destroy, accessors, the empty Tensor,
// concurrent copies, and the kNotImplemented answer without a readiness contract.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "holoscan/dlpack.hpp"
#include "holoscan/tensor.hpp"
#include "support/counting_producer.hpp"
#include "support/gtest_printers.hpp"

namespace holoscan {
namespace {

using test::CountingProducer;
using test::TensorSpec;

static_assert(std::is_nothrow_move_constructible_v<Tensor>);
static_assert(std::is_nothrow_move_assignable_v<Tensor>);
static_assert(std::is_nothrow_copy_constructible_v<Tensor>);

Tensor import_or_die(CountingProducer& producer, const TensorSpec& spec = {}) {
  expected<Tensor> result = make_tensor_from_dlpack_versioned(producer.make_versioned(spec));
  EXPECT_TRUE(result.has_value()) << result.error().message;
  return result.has_value() ? std::move(*result) : Tensor();
}

std::shared_ptr<StreamTrackedReference> tracked(const Tensor& tensor) {
  return std::dynamic_pointer_cast<StreamTrackedReference>(tensor.memory_reference());
}

// An import counts its Tensor's claim as it makes the owner (no retain of its own): exactly one,
// for both import paths, and the drop pairs it.
TEST(TensorClaims, AnImportHoldsExactlyOneClaimWhichItsDropPairs) {
  CountingProducer producer;
  std::shared_ptr<StreamTrackedReference> versioned;
  std::shared_ptr<StreamTrackedReference> legacy;
  {
    expected<Tensor> first = make_tensor_from_dlpack_versioned(producer.make_versioned({}));
    expected<Tensor> second = make_tensor_from_dlpack(producer.make_legacy({}));
    ASSERT_TRUE(first.has_value() && second.has_value());
    versioned = tracked(*first);
    legacy = tracked(*second);
    ASSERT_TRUE(versioned != nullptr && legacy != nullptr);
    EXPECT_EQ(versioned->handle_claims(), 1);
    EXPECT_EQ(legacy->handle_claims(), 1);
  }
  EXPECT_EQ(versioned->handle_claims(), 0);
  EXPECT_EQ(legacy->handle_claims(), 0);
  EXPECT_EQ(versioned->unpaired_releases() + legacy->unpaired_releases(), 0u);
}

TEST(TensorClaims, ConstructCopyMoveAndDestroy) {
  CountingProducer producer;
  std::shared_ptr<StreamTrackedReference> reference;
  {
    Tensor tensor = import_or_die(producer);
    reference = tracked(tensor);
    ASSERT_NE(reference, nullptr);
    EXPECT_EQ(reference->handle_claims(), 1);
    {
      Tensor copy(tensor);
      EXPECT_EQ(reference->handle_claims(), 2);
      Tensor moved(std::move(copy));
      EXPECT_EQ(reference->handle_claims(), 2);
      EXPECT_FALSE(static_cast<bool>(copy));  // NOLINT(bugprone-use-after-move): it must be empty
      EXPECT_EQ(copy.memory_reference(), nullptr);
      EXPECT_TRUE(static_cast<bool>(moved));
      EXPECT_EQ(moved.memory_reference(), reference);
    }
    EXPECT_EQ(reference->handle_claims(), 1);
  }
  EXPECT_EQ(reference->handle_claims(), 0);
  EXPECT_EQ(reference->unpaired_releases(), 0u);
  EXPECT_EQ(producer.deleter_calls(), 0);
  reference.reset();
  EXPECT_EQ(producer.deleter_calls(), 1);
}

TEST(TensorClaims, MoveAssignReleasesTheTargetsOldClaim) {
  CountingProducer producer;
  Tensor source = import_or_die(producer);
  Tensor target = import_or_die(producer);
  auto source_reference = tracked(source);
  auto target_reference = tracked(target);
  ASSERT_NE(source_reference, nullptr);
  ASSERT_NE(target_reference, nullptr);

  target = std::move(source);
  EXPECT_EQ(source_reference->handle_claims(), 1);
  EXPECT_EQ(target_reference->handle_claims(), 0);
  EXPECT_FALSE(static_cast<bool>(source));  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(target.memory_reference(), source_reference);

  target_reference.reset();
  EXPECT_EQ(producer.deleter_calls(), 1);  // the old target's memory had no other owner

  target = Tensor();
  EXPECT_EQ(source_reference->handle_claims(), 0);
  EXPECT_EQ(source_reference->unpaired_releases(), 0u);
  source_reference.reset();
  EXPECT_EQ(producer.deleter_calls(), 2);
}

TEST(TensorClaims, MoveAssignIntoEmptyTensor) {
  CountingProducer producer;
  Tensor source = import_or_die(producer);
  auto reference = tracked(source);
  Tensor target;
  target = std::move(source);
  EXPECT_EQ(reference->handle_claims(), 1);
  EXPECT_FALSE(static_cast<bool>(source));  // NOLINT(bugprone-use-after-move)
}

TEST(TensorClaims, CopyAssignRetainsNewAndReleasesOld) {
  CountingProducer producer;
  Tensor first = import_or_die(producer);
  Tensor second = import_or_die(producer);
  auto first_reference = tracked(first);
  auto second_reference = tracked(second);

  second = first;
  EXPECT_EQ(first_reference->handle_claims(), 2);
  EXPECT_EQ(second_reference->handle_claims(), 0);
  EXPECT_EQ(second.memory_reference(), first_reference);
  EXPECT_EQ(second.data(), first.data());

  Tensor empty;
  second = empty;
  EXPECT_EQ(first_reference->handle_claims(), 1);
  EXPECT_FALSE(static_cast<bool>(second));
  EXPECT_EQ(first_reference->unpaired_releases(), 0u);
  EXPECT_EQ(second_reference->unpaired_releases(), 0u);
}

TEST(TensorClaims, CopyAssignBetweenCopiesOfOneContext) {
  CountingProducer producer;
  Tensor first = import_or_die(producer);
  Tensor second = first;
  auto reference = tracked(first);
  EXPECT_EQ(reference->handle_claims(), 2);
  second = first;
  EXPECT_EQ(reference->handle_claims(), 2);
}

TEST(TensorClaims, SelfCopyAssignKeepsTheClaim) {
  CountingProducer producer;
  Tensor tensor = import_or_die(producer);
  auto reference = tracked(tensor);
  const Tensor& alias = tensor;  // through an alias, so the compiler does not flag self-assignment
  tensor = alias;
  EXPECT_TRUE(static_cast<bool>(tensor));
  EXPECT_EQ(reference->handle_claims(), 1);
  EXPECT_EQ(reference->unpaired_releases(), 0u);
}

TEST(TensorAccessors, CompactTensor) {
  CountingProducer producer;
  TensorSpec spec;
  spec.shape = {2, 3, 4};
  spec.dtype = {kDLFloat, 32, 1};
  spec.device = {kDLCPU, 0};
  spec.byte_offset = 32;
  DLManagedTensorVersioned* managed = producer.make_versioned(spec);
  auto* raw = static_cast<std::byte*>(managed->dl_tensor.data);
  expected<Tensor> result = make_tensor_from_dlpack_versioned(managed);
  ASSERT_TRUE(result.has_value()) << result.error().message;
  const Tensor& tensor = *result;

  EXPECT_TRUE(static_cast<bool>(tensor));
  EXPECT_EQ(tensor.data(), raw + 32);
  EXPECT_EQ(tensor.device().device_type, kDLCPU);
  EXPECT_EQ(tensor.device().device_id, 0);
  EXPECT_EQ(tensor.dtype().code, kDLFloat);
  EXPECT_EQ(tensor.dtype().bits, 32);
  EXPECT_EQ(tensor.dtype().lanes, 1);
  EXPECT_EQ(tensor.ndim(), 3);
  EXPECT_EQ(tensor.shape(), (std::vector<std::int64_t>{2, 3, 4}));
  EXPECT_EQ(tensor.strides(), (std::vector<std::int64_t>{48, 16, 4}));
  EXPECT_EQ(tensor.size(), 24);
  EXPECT_EQ(tensor.itemsize(), 4);
  EXPECT_EQ(tensor.nbytes(), 96);
  EXPECT_TRUE(tensor.is_contiguous());
  EXPECT_EQ(tensor.flags(), 0u);
  EXPECT_EQ(tensor.dl_tensor().ndim, 3);
  EXPECT_NE(tensor.memory_reference(), nullptr);
}

TEST(TensorAccessors, TransposedViewIsNotContiguous) {
  CountingProducer producer;
  TensorSpec spec;
  spec.shape = {4, 3, 2};
  spec.strides = std::vector<std::int64_t>{1, 4, 12};  // the transpose of a compact 2x3x4
  spec.dtype = {kDLInt, 16, 1};
  const Tensor tensor = import_or_die(producer, spec);
  EXPECT_EQ(tensor.strides(), (std::vector<std::int64_t>{2, 8, 24}));
  EXPECT_EQ(tensor.size(), 24);
  EXPECT_EQ(tensor.nbytes(), 48);
  EXPECT_FALSE(tensor.is_contiguous());
}

TEST(TensorAccessors, PaddedRowsAreNotContiguous) {
  CountingProducer producer;
  TensorSpec spec;
  spec.shape = {3, 4};
  spec.strides = std::vector<std::int64_t>{8, 1};
  const Tensor tensor = import_or_die(producer, spec);
  EXPECT_EQ(tensor.strides(), (std::vector<std::int64_t>{32, 4}));
  EXPECT_FALSE(tensor.is_contiguous());
}

TEST(TensorAccessors, SizeOneDimensionsMayHaveAnyStride) {
  CountingProducer producer;
  TensorSpec spec;
  spec.shape = {2, 1, 3};
  spec.strides = std::vector<std::int64_t>{3, 999, 1};
  const Tensor tensor = import_or_die(producer, spec);
  EXPECT_TRUE(tensor.is_contiguous());
}

// A view written by hand into a context (no import, pool or make_tensor accepts its extents, whose
// product overflows int64): before the fix the running compact stride overflowed (undefined
// behaviour, UBSan's abort) and, wrapped, matched the outer stride: reported contiguous.
TEST(TensorAccessors, AHandWrittenViewWhoseExtentsOverflowIsNotContiguous) {
  auto context = std::make_shared<DLManagedTensorContext>();
  context->dl_shape = {3, std::int64_t{1} << 62, 2};
  context->dl_strides = {std::numeric_limits<std::int64_t>::min(), 2, 1};
  DLTensor& view = context->tensor.dl_tensor;
  view.ndim = 3;
  view.dtype = DLDataType{kDLInt, 8, 1};
  view.shape = context->dl_shape.data();
  view.strides = context->dl_strides.data();
  EXPECT_FALSE(Tensor(context).is_contiguous());
  context->dl_shape[0] = 1;  // nothing further out: the inner dimensions are compact
  EXPECT_TRUE(Tensor(context).is_contiguous());
}

TEST(TensorAccessors, VectorLanesCountInItemsize) {
  CountingProducer producer;
  TensorSpec spec;
  spec.shape = {5};
  spec.dtype = {kDLFloat, 32, 4};
  const Tensor tensor = import_or_die(producer, spec);
  EXPECT_EQ(tensor.itemsize(), 16);
  EXPECT_EQ(tensor.nbytes(), 80);
  EXPECT_EQ(tensor.strides(), (std::vector<std::int64_t>{16}));
}

TEST(TensorAccessors, DataIsWritableAndShared) {
  CountingProducer producer;
  TensorSpec spec;
  spec.shape = {8};
  spec.dtype = {kDLInt, 32, 1};
  const Tensor tensor = import_or_die(producer, spec);
  const Tensor copy = tensor;  // NOLINT(performance-unnecessary-copy-initialization)
  auto* values = static_cast<std::int32_t*>(tensor.data());
  for (int i = 0; i < 8; ++i) {
    values[i] = i * 7;
  }
  const auto* seen = static_cast<const std::int32_t*>(copy.data());
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(seen[i], i * 7);
  }
}

TEST(EmptyTensor, ReportsNothing) {
  Tensor tensor;
  EXPECT_FALSE(static_cast<bool>(tensor));
  EXPECT_EQ(tensor.data(), nullptr);
  EXPECT_EQ(tensor.ndim(), 0);
  EXPECT_EQ(tensor.size(), 0);
  EXPECT_EQ(tensor.nbytes(), 0);
  EXPECT_TRUE(tensor.shape().empty());
  EXPECT_TRUE(tensor.strides().empty());
  EXPECT_EQ(tensor.flags(), 0u);
  EXPECT_FALSE(tensor.is_read_only());
  EXPECT_FALSE(tensor.is_copied());
  EXPECT_EQ(tensor.memory_reference(), nullptr);
  EXPECT_FALSE(tensor.has_readiness_stream_contract());
  EXPECT_FALSE(tensor.set_readiness_stream(nullptr));
  EXPECT_FALSE(tensor.set_deallocation_stream(nullptr));

  const expected<void> consumer = tensor.synchronize_for_consumer_stream(nullptr);
  ASSERT_FALSE(consumer.has_value());
  EXPECT_EQ(consumer.error().code, ErrorCode::kInvalidArgument);
}

TEST(EmptyTensor, CopiesAndMovesOfEmptyStayEmpty) {
  Tensor empty;
  Tensor copy = empty;
  Tensor moved = std::move(copy);
  EXPECT_FALSE(static_cast<bool>(copy));  // NOLINT(bugprone-use-after-move)
  EXPECT_FALSE(static_cast<bool>(moved));
  moved = empty;
  EXPECT_FALSE(static_cast<bool>(moved));
}

TEST(TensorReadiness, FreshImportHasNoReadinessContract) {
  CountingProducer producer;
  {
    Tensor tensor = import_or_die(producer);
    EXPECT_FALSE(tensor.has_readiness_stream_contract());

    const expected<void> consumer = tensor.synchronize_for_consumer_stream(nullptr);
    ASSERT_FALSE(consumer.has_value());
    EXPECT_EQ(consumer.error().code, ErrorCode::kNotImplemented);
    EXPECT_FALSE(consumer.error().message.empty());

    const expected<void> host = tensor.synchronize_for_host();
    ASSERT_FALSE(host.has_value());
    EXPECT_EQ(host.error().code, ErrorCode::kNotImplemented);
  }
  EXPECT_EQ(producer.deleter_calls(), 1);
}

TEST(TensorConcurrency, SixteenThreadsCopyAndDestroyOneTensor) {
  constexpr int kThreads = 16;
  constexpr int kRounds = 2000;
  CountingProducer producer;
  Tensor original = import_or_die(producer);
  auto reference = tracked(original);
  ASSERT_NE(reference, nullptr);

  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&original] {
      std::vector<Tensor> copies;
      for (int round = 0; round < kRounds; ++round) {
        copies.push_back(original);
        if (round % 3 == 0) {
          Tensor assigned;
          assigned = copies.back();
          copies.push_back(std::move(assigned));
        }
        if (copies.size() > 8) {
          copies.erase(copies.begin(), copies.begin() + 4);
        }
      }
    });
  }
  for (std::thread& thread : threads) {
    thread.join();
  }

  EXPECT_EQ(reference->handle_claims(), 1);
  original = Tensor();
  EXPECT_EQ(reference->handle_claims(), 0);
  EXPECT_EQ(reference->unpaired_releases(), 0u);
  EXPECT_EQ(producer.deleter_calls(), 0);
  reference.reset();
  EXPECT_EQ(producer.deleter_calls(), 1);
}

TEST(TensorConcurrency, LastCopyDestroyedOnAnyThreadRunsDeleterOnce) {
  constexpr int kThreads = 16;
  CountingProducer producer;
  std::vector<std::thread> threads;
  {
    const Tensor original = import_or_die(producer);
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([copy = original]() mutable {
        for (int round = 0; round < 500; ++round) {
          Tensor local = copy;
          copy = std::move(local);
        }
      });
    }
  }
  for (std::thread& thread : threads) {
    thread.join();
  }
  EXPECT_EQ(producer.deleter_calls(), 1);
}

}  // namespace
}  // namespace holoscan
