// Covers DLPack export (versioned and legacy): flags, owned dims, claims, lifetime, round trips.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "dlpack/recycler.hpp"
#include "holoscan/deferred_release.hpp"
#include "holoscan/dlpack.hpp"
#include "holoscan/tensor.hpp"
#include "support/counting_producer.hpp"
#include "support/gtest_printers.hpp"
#include "support/tensor_helpers.hpp"

namespace holoscan {
namespace {

using test::CountingProducer;
using test::import_or_die;
using test::TensorSpec;
using test::tracked;
using test::writable_view_of;

std::vector<std::int64_t> as_vector(const std::int64_t* values, std::int32_t count) {
  return values == nullptr ? std::vector<std::int64_t>{}
                           : std::vector<std::int64_t>(values, values + count);
}

template <class Managed>
void run_deleter(Managed* managed) {
  ASSERT_NE(managed->deleter, nullptr);
  managed->deleter(managed);
}

TensorSpec strided_spec() {
  TensorSpec spec;
  spec.shape = {3, 4};
  spec.strides = std::vector<std::int64_t>{1, 3};
  spec.dtype = {kDLInt, 32, 1};
  spec.byte_offset = 8;
  spec.flags = DLPACK_FLAG_BITMASK_READ_ONLY | DLPACK_FLAG_BITMASK_IS_COPIED;
  return spec;
}

// The exported DLTensor describes the same elements as `tensor`, through its own shape/strides.
void expect_same_view(const DLTensor& exported, const Tensor& tensor) {
  const DLTensor& view = tensor.dl_tensor();
  EXPECT_EQ(exported.data, view.data);
  EXPECT_EQ(exported.byte_offset, view.byte_offset);
  EXPECT_EQ(exported.ndim, view.ndim);
  EXPECT_EQ(exported.device.device_type, view.device.device_type);
  EXPECT_EQ(exported.device.device_id, view.device.device_id);
  EXPECT_EQ(exported.dtype.code, view.dtype.code);
  EXPECT_EQ(exported.dtype.bits, view.dtype.bits);
  EXPECT_EQ(exported.dtype.lanes, view.dtype.lanes);
  EXPECT_EQ(as_vector(exported.shape, exported.ndim), tensor.shape());
  EXPECT_EQ(as_vector(exported.strides, exported.ndim), as_vector(view.strides, view.ndim));
  if (view.ndim > 0) {
    EXPECT_NE(exported.shape, view.shape);
    EXPECT_NE(exported.strides, view.strides);
  }
}

TEST(ExportVersioned, KeepsFlagsVersionAndView) {
  CountingProducer producer;
  {
    const Tensor tensor = import_or_die(producer, strided_spec());
    expected<DLManagedTensorVersioned*> exported = tensor.to_dlpack_versioned();
    ASSERT_TRUE(exported.has_value()) << exported.error().message;
    DLManagedTensorVersioned* managed = *exported;
    ASSERT_NE(managed, nullptr);
    EXPECT_EQ(managed->version.major, 1u);
    EXPECT_EQ(managed->version.minor, 0u);  // the producer's version (spec), not this build's
    EXPECT_EQ(managed->flags, DLPACK_FLAG_BITMASK_READ_ONLY | DLPACK_FLAG_BITMASK_IS_COPIED);
    expect_same_view(managed->dl_tensor, tensor);
    EXPECT_EQ(as_vector(managed->dl_tensor.strides, 2), (std::vector<std::int64_t>{1, 3}));
    EXPECT_EQ(managed->dl_tensor.byte_offset, 8u);
    run_deleter(managed);
  }
  EXPECT_EQ(producer.deleter_calls(), 1);
}

// A view's byte_offset written by hand after an export: the next export checks it as an import
// would (the record of the view checked before holds no offset), and refuses a span past int64.
TEST(ExportVersioned, AnOffsetWrittenByHandIsCheckedAsAnImportChecksIt) {
  CountingProducer producer;
  {
    TensorSpec spec;
    spec.shape = {4};
    spec.dtype = {kDLFloat, 32, 1};
    Tensor tensor = import_or_die(producer, spec);
    auto first = tensor.to_dlpack_versioned();  // the view is checked and recorded
    ASSERT_TRUE(first.has_value()) << first.error().message;
    run_deleter(*first);
    tensor.dl_ctx()->tensor.dl_tensor.byte_offset = std::uint64_t{1} << 63;
    auto refused = tensor.to_dlpack_versioned();
    ASSERT_FALSE(refused.has_value()) << "exported what an import refuses";
    EXPECT_EQ(refused.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(refused.error().message.find("byte_offset"), std::string::npos)
        << refused.error().message;
    tensor.dl_ctx()->tensor.dl_tensor.byte_offset = 4;
    auto shifted = tensor.to_dlpack_versioned();
    ASSERT_TRUE(shifted.has_value()) << shifted.error().message;
    EXPECT_EQ((*shifted)->dl_tensor.byte_offset, 4u);
    run_deleter(*shifted);
  }
  EXPECT_EQ(producer.deleter_calls(), 1);
}

// A view's data pointer written by hand after an export: the record of the view checked before
// held no address, so the next export at offset 0 reused it and sent out a span that wraps the
// address space (negative strides from an address near 0), which an import refuses.
TEST(ExportVersioned, ADataPointerWrittenByHandIsCheckedAsAnImportChecksIt) {
  CountingProducer producer;
  {
    TensorSpec spec;
    spec.shape = {4};
    spec.strides = {-1};
    spec.dtype = {kDLFloat, 32, 1};  // the span runs 12 bytes back from data (an import's view)
    Tensor tensor = import_or_die(producer, spec);
    auto first = tensor.to_dlpack_versioned();  // the view is checked and recorded
    ASSERT_TRUE(first.has_value()) << first.error().message;
    run_deleter(*first);
    void* const data = tensor.dl_ctx()->tensor.dl_tensor.data;
    tensor.dl_ctx()->tensor.dl_tensor.data = reinterpret_cast<void*>(std::uintptr_t{4});
    auto refused = tensor.to_dlpack_versioned();
    ASSERT_FALSE(refused.has_value()) << "exported what an import refuses";
    EXPECT_EQ(refused.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(refused.error().message.find("leaves the address space"), std::string::npos)
        << refused.error().message;
    tensor.dl_ctx()->tensor.dl_tensor.data = data;  // as checked: exported again
    auto again = tensor.to_dlpack_versioned();
    ASSERT_TRUE(again.has_value()) << again.error().message;
    run_deleter(*again);
  }
  EXPECT_EQ(producer.deleter_calls(), 1);
}

// One export imported twice (a caller bug: a DLPack tensor has one consumer). The second import
// was taken too: when the first let go, the export's owner went back to be recycled, the next
// export took the same block, and the second import's owner then ran that export's deleter,
// freeing memory its consumer still read. This library's own export is now refused a second time,
// and the caller keeps it.
TEST(ExportVersioned, ASecondImportOfOneExportIsRefused) {
  CountingProducer producer;
  {
    TensorSpec spec;
    spec.shape = {4};
    const Tensor tensor = import_or_die(producer, spec);
    auto exported = tensor.to_dlpack_versioned();
    ASSERT_TRUE(exported.has_value()) << exported.error().message;
    auto first = make_tensor_from_dlpack_versioned(*exported);
    ASSERT_TRUE(first.has_value()) << first.error().message;
    auto second = make_tensor_from_dlpack_versioned(*exported);
    ASSERT_FALSE(second.has_value()) << "one export taken by two imports";
    EXPECT_EQ(second.error().code, ErrorCode::kInvalidArgument);
    EXPECT_EQ(second.error().message,
              "make_tensor_from_dlpack_versioned: this export was imported already (a DLPack "
              "tensor has one consumer, which calls its deleter once; the caller keeps it)");
    const Tensor writable = writable_view_of(tensor);
    auto legacy = writable.to_dlpack();
    ASSERT_TRUE(legacy.has_value()) << legacy.error().message;
    auto legacy_first = make_tensor_from_dlpack(*legacy);
    ASSERT_TRUE(legacy_first.has_value()) << legacy_first.error().message;
    auto legacy_second = make_tensor_from_dlpack(*legacy);
    ASSERT_FALSE(legacy_second.has_value()) << "one legacy export taken by two imports";
    EXPECT_EQ(legacy_second.error().code, ErrorCode::kInvalidArgument);
    *first = Tensor();
    *legacy_first = Tensor();
    flush_deferred_releases();
    // The recycled owner of the next export is a new export: imported once, as any.
    auto next = tensor.to_dlpack_versioned();
    ASSERT_TRUE(next.has_value()) << next.error().message;
    auto taken = make_tensor_from_dlpack_versioned(*next);
    ASSERT_TRUE(taken.has_value()) << taken.error().message;
  }
  flush_deferred_releases();
  EXPECT_EQ(producer.deleter_calls(), 1);
}

TEST(ExportVersioned, ComputedStridesAreExportedInElements) {
  CountingProducer producer;
  {
    TensorSpec spec;
    spec.shape = {2, 3, 4};
    spec.dtype = {kDLFloat, 64, 1};
    const Tensor tensor = import_or_die(producer, spec);
    expected<DLManagedTensorVersioned*> exported = tensor.to_dlpack_versioned();
    ASSERT_TRUE(exported.has_value()) << exported.error().message;
    EXPECT_EQ(as_vector((*exported)->dl_tensor.strides, 3), (std::vector<std::int64_t>{12, 4, 1}));
    EXPECT_EQ((*exported)->flags, DLPACK_FLAG_BITMASK_READ_ONLY);  // imports are read-only
    run_deleter(*exported);
  }
  EXPECT_EQ(producer.deleter_calls(), 1);
}

TEST(ExportVersioned, HoldsOneClaimUntilItsDeleterRuns) {
  CountingProducer producer;
  Tensor tensor = import_or_die(producer);
  auto reference = tracked(tensor);
  ASSERT_NE(reference, nullptr);
  EXPECT_EQ(reference->handle_claims(), 1);
  expected<DLManagedTensorVersioned*> first = tensor.to_dlpack_versioned();
  ASSERT_TRUE(first.has_value()) << first.error().message;
  EXPECT_EQ(reference->handle_claims(), 2);
  expected<DLManagedTensorVersioned*> second = tensor.to_dlpack_versioned();
  ASSERT_TRUE(second.has_value()) << second.error().message;
  EXPECT_EQ(reference->handle_claims(), 3);
  EXPECT_NE(*first, *second);
  run_deleter(*first);
  EXPECT_EQ(reference->handle_claims(), 2);
  run_deleter(*second);
  EXPECT_EQ(reference->handle_claims(), 1);
  tensor = Tensor();
  EXPECT_EQ(reference->handle_claims(), 0);
  EXPECT_EQ(reference->unpaired_releases(), 0u);
}

TEST(ExportVersioned, OutlivesEveryTensor) {
  CountingProducer producer;
  DLManagedTensorVersioned* managed = nullptr;
  std::weak_ptr<TensorMemoryReference> weak_reference;
  const StreamTrackedReference* held = nullptr;
  {
    TensorSpec spec;
    spec.shape = {2, 5};
    spec.dtype = {kDLInt, 32, 1};
    Tensor tensor = import_or_die(producer, spec);
    auto* values = static_cast<std::int32_t*>(tensor.data());
    for (int i = 0; i < 10; ++i) {
      values[i] = 100 + i;
    }
    const Tensor copy = tensor;  // NOLINT(performance-unnecessary-copy-initialization)
    expected<DLManagedTensorVersioned*> exported = copy.to_dlpack_versioned();
    ASSERT_TRUE(exported.has_value()) << exported.error().message;
    managed = *exported;
    weak_reference = tensor.memory_reference();
    held = tracked(tensor).get();
  }
  EXPECT_EQ(producer.deleter_calls(), 0);
  // An import's owner lives by its holds: the export keeps it (read through the pointer, which
  // AddressSanitizer checks), not its shared_ptr, whose weak_ptr has expired with the Tensors.
  EXPECT_TRUE(weak_reference.expired());
  EXPECT_EQ(held->handle_claims(), 1);  // the export's
  EXPECT_EQ(as_vector(managed->dl_tensor.shape, managed->dl_tensor.ndim),
            (std::vector<std::int64_t>{2, 5}));
  const auto* values = static_cast<const std::int32_t*>(managed->dl_tensor.data);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(values[i], 100 + i);
  }
  run_deleter(managed);
  EXPECT_EQ(producer.deleter_calls(), 1);
  EXPECT_TRUE(weak_reference.expired());
}

TEST(ExportVersioned, RoundTripSharesDataAndDeletesOnceAtTheEnd) {
  CountingProducer producer;
  Tensor original = import_or_die(producer, strided_spec());
  const void* data = original.data();
  expected<DLManagedTensorVersioned*> exported = original.to_dlpack_versioned();
  ASSERT_TRUE(exported.has_value()) << exported.error().message;
  expected<Tensor> reimported = make_tensor_from_dlpack_versioned(*exported);
  ASSERT_TRUE(reimported.has_value()) << reimported.error().message;

  EXPECT_EQ(reimported->data(), data);
  EXPECT_EQ(reimported->shape(), original.shape());
  EXPECT_EQ(reimported->strides(), original.strides());
  EXPECT_EQ(reimported->flags(), original.flags());
  EXPECT_TRUE(reimported->is_read_only());
  EXPECT_TRUE(reimported->is_copied());

  original = Tensor();
  EXPECT_EQ(producer.deleter_calls(), 0);
  EXPECT_EQ(reimported->data(), data);
  *reimported = Tensor();
  EXPECT_EQ(producer.deleter_calls(), 1);
}

TEST(ExportVersioned, RoundTripReleasedInTheOtherOrder) {
  CountingProducer producer;
  Tensor original = import_or_die(producer);
  expected<DLManagedTensorVersioned*> exported = original.to_dlpack_versioned();
  ASSERT_TRUE(exported.has_value()) << exported.error().message;
  expected<Tensor> reimported = make_tensor_from_dlpack_versioned(*exported);
  ASSERT_TRUE(reimported.has_value()) << reimported.error().message;
  *reimported = Tensor();
  EXPECT_EQ(producer.deleter_calls(), 0);
  original = Tensor();
  EXPECT_EQ(producer.deleter_calls(), 1);
}

TEST(ExportVersioned, ManyDimensionsAndZeroDimensions) {
  CountingProducer producer;
  {
    TensorSpec many;
    many.shape = {1, 2, 1, 3, 1, 2, 1, 2};
    TensorSpec scalar;
    scalar.shape = {};
    for (const TensorSpec& spec : {many, scalar}) {
      const Tensor tensor = import_or_die(producer, spec);
      expected<DLManagedTensorVersioned*> exported = tensor.to_dlpack_versioned();
      ASSERT_TRUE(exported.has_value()) << exported.error().message;
      expect_same_view((*exported)->dl_tensor, tensor);
      run_deleter(*exported);
    }
  }
  EXPECT_EQ(producer.deleter_calls(), 2);
}

TEST(ExportLegacy, KeepsViewWithoutFlags) {
  CountingProducer producer;
  {
    const Tensor tensor = writable_view_of(import_or_die(producer, strided_spec()));
    expected<DLManagedTensor*> exported = tensor.to_dlpack();
    ASSERT_TRUE(exported.has_value()) << exported.error().message;
    expect_same_view((*exported)->dl_tensor, tensor);
    EXPECT_EQ(as_vector((*exported)->dl_tensor.strides, 2), (std::vector<std::int64_t>{1, 3}));
    EXPECT_EQ((*exported)->dl_tensor.byte_offset, 8u);
    run_deleter(*exported);
  }
  EXPECT_EQ(producer.deleter_calls(), 1);
}

TEST(ExportLegacy, HoldsOneClaimUntilItsDeleterRuns) {
  CountingProducer producer;
  Tensor tensor = writable_view_of(import_or_die(producer));
  auto reference = tracked(tensor);
  ASSERT_NE(reference, nullptr);
  expected<DLManagedTensor*> exported = tensor.to_dlpack();
  ASSERT_TRUE(exported.has_value()) << exported.error().message;
  EXPECT_EQ(reference->handle_claims(), 2);
  run_deleter(*exported);
  EXPECT_EQ(reference->handle_claims(), 1);
}

TEST(ExportLegacy, OutlivesEveryTensor) {
  CountingProducer producer;
  DLManagedTensor* managed = nullptr;
  {
    TensorSpec spec;
    spec.shape = {4};
    spec.dtype = {kDLUInt, 8, 1};
    Tensor tensor = writable_view_of(import_or_die(producer, spec));
    auto* bytes = static_cast<std::uint8_t*>(tensor.mutable_data().value());
    for (int i = 0; i < 4; ++i) {
      bytes[i] = static_cast<std::uint8_t>(0xA0 + i);
    }
    expected<DLManagedTensor*> exported = tensor.to_dlpack();
    ASSERT_TRUE(exported.has_value()) << exported.error().message;
    managed = *exported;
  }
  EXPECT_EQ(producer.deleter_calls(), 0);
  ASSERT_EQ(managed->dl_tensor.ndim, 1);
  EXPECT_EQ(managed->dl_tensor.shape[0], 4);
  const auto* bytes = static_cast<const std::uint8_t*>(managed->dl_tensor.data);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(bytes[i], 0xA0 + i);
  }
  run_deleter(managed);
  EXPECT_EQ(producer.deleter_calls(), 1);
}

TEST(ExportLegacy, RoundTripDropsFlagsAndDeletesOnceAtTheEnd) {
  CountingProducer producer;
  Tensor original = writable_view_of(import_or_die(producer, strided_spec()));
  const void* data = original.data();
  expected<DLManagedTensor*> exported = original.to_dlpack();
  ASSERT_TRUE(exported.has_value()) << exported.error().message;
  expected<Tensor> reimported = make_tensor_from_dlpack(*exported);
  ASSERT_TRUE(reimported.has_value()) << reimported.error().message;
  EXPECT_EQ(reimported->data(), data);
  EXPECT_EQ(reimported->shape(), original.shape());
  EXPECT_EQ(reimported->strides(), original.strides());
  EXPECT_EQ(reimported->flags(), 0u);
  original = Tensor();
  EXPECT_EQ(producer.deleter_calls(), 0);
  *reimported = Tensor();
  EXPECT_EQ(producer.deleter_calls(), 1);
}

TEST(ExportLegacy, ReadOnlyAuthorityIsRefusedAndNothingIsHeld) {
  CountingProducer producer;
  {
    const Tensor tensor = import_or_die(producer, strided_spec());
    auto reference = tracked(tensor);
    ASSERT_NE(reference, nullptr);
    expected<DLManagedTensor*> exported = tensor.to_dlpack();
    ASSERT_FALSE(exported.has_value());
    EXPECT_EQ(exported.error().code, ErrorCode::kNotSupported);
    EXPECT_NE(
        exported.error().message.find("Legacy DLPack cannot represent read-only Tensor authority "
                                      "or an active read lease"),  // 5.0's sentence, whole
        std::string::npos)
        << exported.error().message;
    EXPECT_EQ(reference->handle_claims(), 1);       // only the Tensor's own claim
    auto versioned = tensor.to_dlpack_versioned();  // the format that can say read-only
    ASSERT_TRUE(versioned.has_value()) << versioned.error().message;
    EXPECT_NE((*versioned)->flags & DLPACK_FLAG_BITMASK_READ_ONLY, 0u);
    run_deleter(*versioned);
  }
  EXPECT_EQ(producer.deleter_calls(), 1);
}

TEST(ExportVersioned, StampsTheContextsVersion) {
  CountingProducer producer;
  TensorSpec spec;
  spec.version = {1, 1};
  const Tensor tensor = import_or_die(producer, spec);
  expected<DLManagedTensorVersioned*> exported = tensor.to_dlpack_versioned();
  ASSERT_TRUE(exported.has_value()) << exported.error().message;
  EXPECT_EQ((*exported)->version.major, 1u);
  EXPECT_EQ((*exported)->version.minor, 1u);
  run_deleter(*exported);
  // A context built by hand starts at this build's version; one whose version was written to
  // {0, 0} by hand (where contexts used to start) is stamped with this build's too.
  float value = 1.0f;
  auto context = std::make_shared<DLManagedTensorContext>();
  context->tensor.dl_tensor.data = &value;
  context->tensor.dl_tensor.device = {kDLCPU, 0};
  context->tensor.dl_tensor.dtype = {kDLFloat, 32, 1};
  const Tensor hand_made(context);
  for (const DLPackVersion written : {context->tensor.version, DLPackVersion{0, 0}}) {
    context->tensor.version = written;
    exported = hand_made.to_dlpack_versioned();
    ASSERT_TRUE(exported.has_value()) << exported.error().message;
    EXPECT_EQ((*exported)->version.major, static_cast<std::uint32_t>(DLPACK_MAJOR_VERSION));
    EXPECT_EQ((*exported)->version.minor, static_cast<std::uint32_t>(DLPACK_MINOR_VERSION));
    run_deleter(*exported);
  }
}

// An import's view was checked when it was made and is copied out as it is; a view pointed
// elsewhere by hand, or given another dtype, is checked again before anything is copied out.
TEST(ExportVersioned, AViewChangedByHandIsCheckedAgain) {
  CountingProducer producer;
  Tensor tensor = import_or_die(producer, strided_spec());
  auto reference = tracked(tensor);
  std::vector<std::int64_t> bad_shape{-1, 4};
  DLTensor& view = tensor.dl_ctx()->tensor.dl_tensor;
  std::int64_t* own_shape = view.shape;
  view.shape = bad_shape.data();
  expected<DLManagedTensorVersioned*> refused = tensor.to_dlpack_versioned();
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(refused.error().message, "Tensor::to_dlpack_versioned: shape[0] is -1, must be >= 0");
  view.shape = own_shape;
  view.dtype.bits = 12;
  refused = tensor.to_dlpack_versioned();
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().message,
            "Tensor::to_dlpack_versioned: dtype.bits 12 is not a whole number of bytes");
  EXPECT_EQ(reference->handle_claims(), 1);  // a refused export holds nothing
  view.dtype.bits = 32;
  expected<DLManagedTensorVersioned*> exported = tensor.to_dlpack_versioned();
  ASSERT_TRUE(exported.has_value()) << exported.error().message;
  expect_same_view((*exported)->dl_tensor, tensor);
  run_deleter(*exported);
}

// Values written in place into the context's own shape and strides (the view still points at
// them, with the ndim, dtype and flags it was checked with) are checked again too: an export
// never carries a negative extent or a span that overflows, in either format.
TEST(ExportVersioned, ValuesChangedInPlaceAreCheckedAgain) {
  CountingProducer producer;
  {
    Tensor tensor = import_or_die(producer, strided_spec());
    auto reference = tracked(tensor);
    DLManagedTensorContext& context = *tensor.dl_ctx();
    context.dl_shape[0] = -1;
    expected<DLManagedTensorVersioned*> refused = tensor.to_dlpack_versioned();
    ASSERT_FALSE(refused.has_value());
    EXPECT_EQ(refused.error().code, ErrorCode::kInvalidArgument);
    EXPECT_EQ(refused.error().message, "Tensor::to_dlpack_versioned: shape[0] is -1, must be >= 0");
    context.dl_shape[0] = 3;
    context.dl_strides[1] = INT64_MAX;
    refused = tensor.to_dlpack_versioned();
    ASSERT_FALSE(refused.has_value());
    EXPECT_EQ(refused.error().message, "Tensor::to_dlpack_versioned: strides[1] is " +
                                           std::to_string(INT64_MAX) +
                                           ", too large to express in bytes");
    EXPECT_EQ(reference->handle_claims(), 1);  // a refused export holds nothing
    context.dl_strides[1] = 3;
    expected<DLManagedTensorVersioned*> exported = tensor.to_dlpack_versioned();
    ASSERT_TRUE(exported.has_value()) << exported.error().message;
    expect_same_view((*exported)->dl_tensor, tensor);
    run_deleter(*exported);
  }
  EXPECT_EQ(producer.deleter_calls(), 1);
}

// A weight per position, as a weighted sum over a view's values would give it (splitmix64, odd).
std::uint64_t position_weight(std::uint64_t position) {
  std::uint64_t x = position + 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return (x ^ (x >> 31)) | 1U;
}

// The inverse of an odd number modulo 2^64 (Newton's iteration doubles the good bits each step).
std::uint64_t inverse_of_odd(std::uint64_t odd) {
  std::uint64_t inverse = odd;
  for (int step = 0; step < 6; ++step) {
    inverse *= 2 - odd * inverse;
  }
  return inverse;
}

// Two values written in place so that a weighted sum of the view's values stays what it was (a
// fingerprint of that kind cannot tell them from the original): the export still refuses the
// negative extent.
TEST(ExportVersioned, CompensatingChangesInPlaceAreCheckedAgain) {
  CountingProducer producer;
  {
    Tensor tensor = import_or_die(producer, strided_spec());
    auto reference = tracked(tensor);
    DLManagedTensorContext& context = *tensor.dl_ctx();
    // Extent 0 sits at position 0, stride 1 at position 3 (extent i at 2i, stride i at 2i + 1).
    const std::uint64_t extent_change = static_cast<std::uint64_t>(-1 - context.dl_shape[0]);
    const std::uint64_t stride_change =
        0 - extent_change * position_weight(0) * inverse_of_odd(position_weight(3));
    ASSERT_EQ(extent_change * position_weight(0) + stride_change * position_weight(3), 0u);
    context.dl_shape[0] = -1;
    context.dl_strides[1] += static_cast<std::int64_t>(stride_change);
    expected<DLManagedTensorVersioned*> refused = tensor.to_dlpack_versioned();
    ASSERT_FALSE(refused.has_value()) << "exported shape[0] " << (*refused)->dl_tensor.shape[0];
    EXPECT_EQ(refused.error().code, ErrorCode::kInvalidArgument);
    EXPECT_EQ(refused.error().message, "Tensor::to_dlpack_versioned: shape[0] is -1, must be >= 0");
    EXPECT_EQ(reference->handle_claims(), 1);  // a refused export holds nothing
  }
  EXPECT_EQ(producer.deleter_calls(), 1);
}

// A view of more dimensions than a context records is checked on every export: a value written
// in place there is caught too, and an unchanged view exports as it is.
TEST(ExportVersioned, ValuesChangedInPlaceAreCheckedAgainInManyDimensions) {
  CountingProducer producer;
  {
    TensorSpec spec;
    spec.shape = {2, 1, 3, 1, 2, 1, 2, 1};
    Tensor tensor = import_or_die(producer, spec);
    DLManagedTensorContext& context = *tensor.dl_ctx();
    expected<DLManagedTensorVersioned*> exported = tensor.to_dlpack_versioned();
    ASSERT_TRUE(exported.has_value()) << exported.error().message;
    expect_same_view((*exported)->dl_tensor, tensor);
    run_deleter(*exported);
    context.dl_shape[7] = -2;
    const expected<DLManagedTensorVersioned*> refused = tensor.to_dlpack_versioned();
    ASSERT_FALSE(refused.has_value());
    EXPECT_EQ(refused.error().message, "Tensor::to_dlpack_versioned: shape[7] is -2, must be >= 0");
  }
  EXPECT_EQ(producer.deleter_calls(), 1);
}

TEST(ExportLegacy, ValuesChangedInPlaceAreCheckedAgain) {
  CountingProducer producer;
  Tensor tensor = writable_view_of(import_or_die(producer, TensorSpec{}));  // a checked copy
  tensor.dl_ctx()->dl_shape[1] = -3;
  const expected<DLManagedTensor*> refused = tensor.to_dlpack();
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(refused.error().message, "Tensor::to_dlpack: shape[1] is -3, must be >= 0");
  tensor.dl_ctx()->dl_shape[1] = 3;
  const expected<DLManagedTensor*> exported = tensor.to_dlpack();
  ASSERT_TRUE(exported.has_value()) << exported.error().message;
  expect_same_view((*exported)->dl_tensor, tensor);
  run_deleter(*exported);
}

// Replaces the memory reference of `tensor`'s context as a holder may (the member is public),
// moving the Tensor's claim along with it; returns the new reference.
std::shared_ptr<DLManagedMemoryBufferVersioned> replace_reference(Tensor& tensor) {
  auto replacement = std::make_shared<DLManagedMemoryBufferVersioned>(nullptr);
  tensor.release_handle();
  tensor.dl_ctx()->memory_reference = replacement;
  tensor.retain_handle();
  return replacement;
}

// An export holds the memory it exported, and its claim, on the reference it exported from: a
// holder that puts another reference into the shared context afterwards neither frees the
// exported memory under the export nor makes the export's claim land on the newcomer.
template <class Managed, class Export>
void expect_export_keeps_its_reference(Tensor tensor, Export export_tensor,
                                       CountingProducer& producer) {
  // An import's owner lives by its holds: the export keeps it (AddressSanitizer checks the reads
  // through this pointer), though its shared_ptr goes with the last Tensor.
  const StreamTrackedReference* original = tracked(tensor).get();
  expected<Managed*> exported = export_tensor(tensor);
  ASSERT_TRUE(exported.has_value()) << exported.error().message;
  std::shared_ptr<DLManagedMemoryBufferVersioned> replacement = replace_reference(tensor);
  tensor = Tensor();
  EXPECT_EQ(producer.deleter_calls(), 0);   // the export still reads the producer's memory
  EXPECT_EQ(original->handle_claims(), 1);  // the export's
  EXPECT_EQ(original->unpaired_releases(), 0u);
  run_deleter(*exported);
  EXPECT_EQ(producer.deleter_calls(), 1);
  EXPECT_EQ(replacement->handle_claims(), 0);
  EXPECT_EQ(replacement->unpaired_releases(), 0u);
}

TEST(ExportVersioned, KeepsItsReferenceWhenTheContextsIsReplaced) {
  CountingProducer producer;
  expect_export_keeps_its_reference<DLManagedTensorVersioned>(
      import_or_die(producer), [](const Tensor& t) { return t.to_dlpack_versioned(); }, producer);
}

TEST(ExportLegacy, KeepsItsReferenceWhenTheContextsIsReplaced) {
  CountingProducer producer;
  Tensor writable = writable_view_of(import_or_die(producer));  // the import is gone after this
  expect_export_keeps_its_reference<DLManagedTensor>(
      std::move(writable), [](const Tensor& t) { return t.to_dlpack(); }, producer);
}

// A context made outside the library may own memory through its own deleter, beside a reference
// that owns none: the export keeps the context itself until its deleter runs.
TEST(ExportVersioned, KeepsAContextMadeElsewhereWhoseDeleterOwnsTheMemory) {
  auto storage = std::make_unique<float[]>(4);
  bool context_gone = false;
  std::shared_ptr<DLManagedTensorContext> context(new DLManagedTensorContext(),
                                                  [&context_gone](DLManagedTensorContext* done) {
                                                    context_gone = true;
                                                    delete done;
                                                  });
  context->dl_shape = {4};
  context->tensor.dl_tensor.data = storage.get();
  context->tensor.dl_tensor.device = DLDevice{kDLCPU, 0};
  context->tensor.dl_tensor.ndim = 1;
  context->tensor.dl_tensor.dtype = DLDataType{kDLFloat, 32, 1};
  context->tensor.dl_tensor.shape = context->dl_shape.data();
  context->memory_reference = std::make_shared<TensorMemoryReference>();  // owns nothing
  auto exported = Tensor(std::move(context)).to_dlpack_versioned();
  ASSERT_TRUE(exported.has_value()) << exported.error().message;
  EXPECT_FALSE(context_gone) << "the export let go of the context that owns its memory";
  (*exported)->deleter(*exported);
  EXPECT_TRUE(context_gone);
}

// An import's context goes back to be recycled once its Tensors are gone, and the next import may
// take it: the export holds the memory through its reference alone, and its own view.
TEST(ExportVersioned, OutlivesItsImportsRecycledContext) {
  CountingProducer first;
  CountingProducer second;
  DLManagedTensorVersioned* exported = nullptr;
  {
    auto exports = import_or_die(first).to_dlpack_versioned();
    ASSERT_TRUE(exports.has_value()) << exports.error().message;
    exported = *exports;
  }
  const void* data = exported->dl_tensor.data;
  const std::vector<std::int64_t> shape(exported->dl_tensor.shape,
                                        exported->dl_tensor.shape + exported->dl_tensor.ndim);
  {
    TensorSpec other;
    other.shape = {7, 3};
    const Tensor next = import_or_die(second, other);
    EXPECT_EQ(exported->dl_tensor.data, data);
    EXPECT_EQ(std::vector<std::int64_t>(exported->dl_tensor.shape,
                                        exported->dl_tensor.shape + exported->dl_tensor.ndim),
              shape);
  }
  EXPECT_EQ(first.deleter_calls(), 0) << "the import's memory went while exported";
  exported->deleter(exported);
  EXPECT_EQ(first.deleter_calls(), 1);
  EXPECT_EQ(second.deleter_calls(), 1);
}

TEST(ExportEmpty, BothFormatsRefuseAnEmptyTensor) {
  const Tensor empty;
  const expected<DLManagedTensorVersioned*> versioned = empty.to_dlpack_versioned();
  ASSERT_FALSE(versioned.has_value());
  EXPECT_EQ(versioned.error().code, ErrorCode::kInvalidArgument);
  const expected<DLManagedTensor*> legacy = empty.to_dlpack();
  ASSERT_FALSE(legacy.has_value());
  EXPECT_EQ(legacy.error().code, ErrorCode::kInvalidArgument);
}

// The fields beside the layout are public too. An export of a view whose device no reader knows,
// whose data is null for elements, or whose flags carry bits this build does not know went out
// as written (a consumer that trusts it reads through a null pointer); both formats refuse them
// as an import does, through the checked fast path (values written in place) and without it, and
// hold nothing. A zero-size view keeps its null data.
TEST(ExportBoth, AViewWithoutDataOrWithAnUnknownDeviceOrFlagsIsRefused) {
  CountingProducer producer;
  Tensor imported = import_or_die(producer, strided_spec());
  Tensor tensor = writable_view_of(imported);
  auto reference = tracked(tensor);
  DLManagedTensorVersioned& view = tensor.dl_ctx()->tensor;
  const auto expect_refused = [&](const std::string& what) {
    expected<DLManagedTensorVersioned*> versioned = tensor.to_dlpack_versioned();
    ASSERT_FALSE(versioned.has_value());
    EXPECT_EQ(versioned.error().code, ErrorCode::kInvalidArgument);
    EXPECT_EQ(versioned.error().message, "Tensor::to_dlpack_versioned: " + what);
    expected<DLManagedTensor*> legacy = tensor.to_dlpack();
    ASSERT_FALSE(legacy.has_value());
    EXPECT_EQ(legacy.error().code, ErrorCode::kInvalidArgument);
    EXPECT_EQ(legacy.error().message, "Tensor::to_dlpack: " + what);
    EXPECT_EQ(reference->handle_claims(), 2);  // the two Tensors' claims alone
  };
  void* const data = view.dl_tensor.data;
  view.dl_tensor.data = nullptr;
  expect_refused("data is null for a tensor of 12 elements");
  view.dl_tensor.data = data;
  view.dl_tensor.device.device_id = -3;
  expect_refused("device.device_id -3 is negative");
  view.dl_tensor.device = DLDevice{static_cast<DLDeviceType>(999), 0};
  expect_refused("device.device_type 999 is not a known DLDeviceType");
  view.dl_tensor.device = DLDevice{kDLCPU, 0};
  view.flags = std::uint64_t{1} << 40;
  expect_refused("flags has unknown bits 0x10000000000");
  view.flags = 0;
  // The same without the fast path: a view the library never checked.
  std::vector<std::int64_t> shape{3, 4};
  view.dl_tensor.shape = shape.data();
  view.dl_tensor.data = nullptr;
  expect_refused("data is null for a tensor of 12 elements");
  // Zero elements need no data.
  shape[0] = 0;
  expected<DLManagedTensorVersioned*> empty = tensor.to_dlpack_versioned();
  ASSERT_TRUE(empty.has_value()) << empty.error().message;
  EXPECT_EQ((*empty)->dl_tensor.data, nullptr);
  run_deleter(*empty);
  EXPECT_EQ(producer.deleter_calls(), 0);
  view.dl_tensor.data = data;
  shape[0] = 3;
}

// A deleter called twice (a consumer's bug: DLPack runs it once) is reported and ignored. It
// used to give the recycled owner back twice, so that two later exports shared one owner: one
// described the other's tensor, and a producer's deleter never ran.
template <class Managed>
void expect_second_deleter_call_ignored(expected<Managed*> (Tensor::*to_dlpack)() const) {
  CountingProducer producer;
  Tensor tensor = writable_view_of(import_or_die(producer));  // legacy DLPack needs one
  auto reference = tracked(tensor);
  ASSERT_NE(reference, nullptr);
  expected<Managed*> exported = (tensor.*to_dlpack)();
  ASSERT_TRUE(exported.has_value()) << exported.error().message;
  const std::uint64_t failed_before = failed_releases();
  run_deleter(*exported);
  EXPECT_EQ(failed_releases(), failed_before);
  run_deleter(*exported);  // the bug
  EXPECT_EQ(failed_releases(), failed_before + 1);
  EXPECT_EQ(reference->handle_claims(), 1);  // the Tensor's own claim, released once only
  EXPECT_EQ(reference->unpaired_releases(), 0u);

  TensorSpec other_spec;
  other_spec.shape = {7};
  CountingProducer other_producer;
  Tensor other = writable_view_of(import_or_die(other_producer, other_spec));
  expected<Managed*> first = (tensor.*to_dlpack)();
  expected<Managed*> second = (other.*to_dlpack)();
  ASSERT_TRUE(first.has_value() && second.has_value());
  EXPECT_NE(*first, *second);
  EXPECT_EQ((*first)->dl_tensor.ndim, 2);
  EXPECT_EQ((*second)->dl_tensor.ndim, 1);
  run_deleter(*first);
  run_deleter(*second);
  tensor = Tensor();
  other = Tensor();
  reference.reset();
  flush_deferred_releases();
  EXPECT_EQ(producer.deleter_calls(), 1);
  EXPECT_EQ(other_producer.deleter_calls(), 1);
}

TEST(ExportVersioned, ADeleterCalledAgainIsReportedAndIgnored) {
  expect_second_deleter_call_ignored(&Tensor::to_dlpack_versioned);
}

TEST(ExportLegacy, ADeleterCalledAgainIsReportedAndIgnored) {
  expect_second_deleter_call_ignored(&Tensor::to_dlpack);
}

// An import of this library's export whose deleter ran already (its consumer let go of it) is
// refused before anything of it is read: it took in the gone tensor (a view of freed memory, or
// garbage extents once its shape had gone with it) and counted a second deleter call at its end.
template <class Managed>
void expect_spent_export_refused(expected<Managed*> (Tensor::*to_dlpack)() const,
                                 expected<Tensor> (*import)(Managed*), const char* who) {
  for (const std::int32_t ndim : {1, 8}) {  // 8: its shape was on the heap, freed with it
    SCOPED_TRACE("ndim " + std::to_string(ndim));
    TensorSpec spec;
    spec.shape.assign(static_cast<std::size_t>(ndim), 2);
    CountingProducer producer;
    Tensor tensor = writable_view_of(import_or_die(producer, spec));
    expected<Managed*> exported = (tensor.*to_dlpack)();
    ASSERT_TRUE(exported.has_value()) << exported.error().message;
    {
      expected<Tensor> first = import(*exported);
      ASSERT_TRUE(first.has_value()) << first.error().message;
    }  // its end runs the export's deleter
    flush_deferred_releases();
    const std::uint64_t failed_before = failed_releases();
    expected<Tensor> again = import(*exported);
    ASSERT_FALSE(again.has_value());
    EXPECT_EQ(again.error().code, ErrorCode::kInvalidArgument);
    EXPECT_EQ(again.error().message,
              std::string(who) +
                  ": this export's deleter ran already (a DLPack tensor has one consumer, which "
                  "calls its deleter once; the tensor it described may be gone)");
    EXPECT_EQ(failed_releases(), failed_before);
    tensor = Tensor();
    flush_deferred_releases();
    EXPECT_EQ(producer.deleter_calls(), 1);
  }
}

TEST(ExportVersioned, AnImportOfAnExportWhoseDeleterRanIsRefused) {
  expect_spent_export_refused(&Tensor::to_dlpack_versioned, &make_tensor_from_dlpack_versioned,
                              "make_tensor_from_dlpack_versioned");
}

TEST(ExportLegacy, AnImportOfAnExportWhoseDeleterRanIsRefused) {
  expect_spent_export_refused(&Tensor::to_dlpack, &make_tensor_from_dlpack,
                              "make_tensor_from_dlpack");
}

// Two calls of one export's deleter at once, on two threads (a consumer's bug): one runs it, the
// other is counted and ignored. Both took the owner, and two later exports shared one owner.
TEST(ExportVersioned, TwoDeleterCallsAtOnceRunItOnce) {
  TensorSpec read_only;
  read_only.flags = DLPACK_FLAG_BITMASK_READ_ONLY;
  CountingProducer producer;
  Tensor tensor = import_or_die(producer, read_only);
  std::atomic<DLManagedTensorVersioned*> target{nullptr};
  std::atomic<int> round{0};
  std::atomic<int> done{0};
  constexpr int kRounds = 100000;
  std::thread second([&] {
    for (int r = 1; r <= kRounds; ++r) {
      while (round.load() != r) {
        std::this_thread::yield();
      }
      run_deleter(target.load());
      done.store(r);
    }
  });
  int miscounted = 0;
  for (int r = 1; r <= kRounds; ++r) {
    expected<DLManagedTensorVersioned*> exported = tensor.to_dlpack_versioned();
    ASSERT_TRUE(exported.has_value()) << exported.error().message;
    target.store(*exported);
    const std::uint64_t failed_before = failed_releases();
    round.store(r);  // the other thread calls as this one does
    run_deleter(*exported);
    while (done.load() != r) {
      std::this_thread::yield();
    }
    miscounted += failed_releases() != failed_before + 1 ? 1 : 0;
  }
  second.join();
  EXPECT_EQ(miscounted, 0) << "rounds where both calls ran the deleter";
  expected<DLManagedTensorVersioned*> a = tensor.to_dlpack_versioned();
  expected<DLManagedTensorVersioned*> b = tensor.to_dlpack_versioned();
  ASSERT_TRUE(a.has_value() && b.has_value());
  EXPECT_NE(*a, *b) << "two live exports share one owner";
  run_deleter(*a);
  run_deleter(*b);
  tensor = Tensor();
  flush_deferred_releases();
  EXPECT_EQ(producer.deleter_calls(), 1);
}

// Threads that export and threads that run the deleters, with more owners alive than the
// recycler's lists hold: the kept owners move between threads through the shared stack intact
// (each export is whole, each deleter runs once, the producer's once at the end).
TEST(ExportVersioned, OwnersCrossThreadsPastTheRecyclersListsIntact) {
  constexpr int kThreads = 4;
  constexpr std::size_t kExports = 1200;
  TensorSpec read_only;
  read_only.flags = DLPACK_FLAG_BITMASK_READ_ONLY;
  CountingProducer producer;
  Tensor tensor = import_or_die(producer, read_only);
  const std::uint64_t failed_before = failed_releases();
  for (int round = 0; round < 3; ++round) {
    std::vector<std::vector<DLManagedTensorVersioned*>> made(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        made[t].reserve(kExports);
        for (std::size_t i = 0; i < kExports; ++i) {
          expected<DLManagedTensorVersioned*> exported = tensor.to_dlpack_versioned();
          if (!exported) {
            ADD_FAILURE() << exported.error().message;
            return;
          }
          made[t].push_back(*exported);
        }
      });
    }
    for (std::thread& thread : threads) {
      thread.join();
    }
    threads.clear();
    for (int t = 0; t < kThreads; ++t) {  // each thread runs another's deleters
      threads.emplace_back([&, t] {
        for (DLManagedTensorVersioned* managed : made[(t + 1) % kThreads]) {
          EXPECT_EQ(managed->dl_tensor.ndim, tensor.ndim());
          EXPECT_EQ(managed->dl_tensor.data, tensor.data());
          run_deleter(managed);
        }
      });
    }
    for (std::thread& thread : threads) {
      thread.join();
    }
  }
  EXPECT_EQ(failed_releases(), failed_before);
  tensor = Tensor();
  flush_deferred_releases();
  EXPECT_EQ(producer.deleter_calls(), 1);
}

#if !HOLOSCAN_DLPACK_RECYCLE  // AddressSanitizer
// A gone owner's memory is kept, not freed, yet AddressSanitizer still reports a use of it: all
// but the two fields a second deleter call reads are poisoned.
TEST(ExportVersionedDeathTest, AGoneOwnersFieldsAreStillReportedWhenUsed) {
  CountingProducer producer;
  const Tensor tensor = import_or_die(producer);
  expected<DLManagedTensorVersioned*> exported = tensor.to_dlpack_versioned();
  ASSERT_TRUE(exported.has_value()) << exported.error().message;
  DLManagedTensorVersioned* gone = *exported;
  run_deleter(gone);
  EXPECT_EQ(gone->manager_ctx, nullptr);  // readable: what a second call reads
  EXPECT_DEATH((void)*static_cast<volatile std::int32_t*>(&gone->dl_tensor.ndim),
               "use-after-poison");
}
#endif

// More owners given back than the recycler's lists hold, half of them from a thread that has
// ended, and owners of other kinds made in between (imports): every second call still finds its
// owner cleared. The owners past the lists went back to the heap, and a second call read freed
// memory and freed it again ("double free or corruption"); AddressSanitizer reported every one.
TEST(ExportVersioned, EverySecondDeleterCallIsIgnoredHoweverManyOwnersWentBack) {
  constexpr std::size_t kExports = 1500;  // past a thread's 32 and the shared 1,024
  TensorSpec read_only;
  read_only.flags = DLPACK_FLAG_BITMASK_READ_ONLY;  // any number of exports alive at once
  CountingProducer producer;
  Tensor tensor = import_or_die(producer, read_only);
  std::vector<DLManagedTensorVersioned*> exports;
  exports.reserve(kExports);
  for (std::size_t i = 0; i < kExports; ++i) {
    expected<DLManagedTensorVersioned*> exported = tensor.to_dlpack_versioned();
    ASSERT_TRUE(exported.has_value()) << exported.error().message;
    exports.push_back(*exported);
  }
  std::thread([&] {
    for (std::size_t i = 0; i < kExports / 2; ++i) {
      run_deleter(exports[i]);
    }
  }).join();
  for (std::size_t i = kExports / 2; i < kExports; ++i) {
    run_deleter(exports[i]);
  }
  {
    std::vector<CountingProducer> others(64);
    std::vector<Tensor> imports;
    for (CountingProducer& other : others) {
      imports.push_back(import_or_die(other));
    }
  }
  const std::uint64_t failed_before = failed_releases();
  for (std::size_t i = kExports; i-- > 0;) {
    run_deleter(exports[i]);  // the bug, on every export
  }
  EXPECT_EQ(failed_releases(), failed_before + kExports);
  tensor = Tensor();
  flush_deferred_releases();
  EXPECT_EQ(producer.deleter_calls(), 1);
}

}  // namespace
}  // namespace holoscan
