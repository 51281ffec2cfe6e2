// Covers the Tensor members and free functions as Holoscan 5.0 spells them: the by-value context
// constructor, mutable_data(), explicit handle claims, the context overloads of
// copy_dl_tensor_with_owned_metadata and dldatatype_from_typestr on a string_view.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dlpack/context_recycler.hpp"
#include "holoscan/dlpack.hpp"
#include "holoscan/tensor.hpp"
#include "holoscan/tensor_pool.hpp"
#include "support/allocation_sweep.hpp"
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

TEST(TensorConstruction, ConstLvalueContextIsSharedAndRvalueIsTaken) {
  CountingProducer producer;
  const Tensor imported = import_or_die(producer);
  const std::shared_ptr<DLManagedTensorContext> context = imported.dl_ctx();
  auto reference = tracked(imported);
  ASSERT_NE(reference, nullptr);
  {
    const Tensor shared(context);  // a const lvalue: copied into the parameter
    EXPECT_EQ(shared.dl_ctx(), context);
    EXPECT_EQ(reference->handle_claims(), 2);
    std::shared_ptr<DLManagedTensorContext> handed = context;
    const Tensor taken(std::move(handed));
    EXPECT_EQ(handed, nullptr);  // NOLINT(bugprone-use-after-move): moved into the Tensor
    EXPECT_EQ(reference->handle_claims(), 3);
  }
  EXPECT_EQ(reference->handle_claims(), 1);
  const Tensor empty(std::shared_ptr<DLManagedTensorContext>{});
  EXPECT_FALSE(static_cast<bool>(empty));
}

TEST(TensorMutableData, EmptyTensorIsAnInvalidArgument) {
  Tensor empty;
  auto data = empty.mutable_data();
  ASSERT_FALSE(data.has_value());
  EXPECT_EQ(data.error().code, ErrorCode::kInvalidArgument);
}

TEST(TensorMutableData, NullDataIsAnInvalidArgument) {
  CountingProducer producer;
  TensorSpec spec;
  spec.shape = {0, 3};
  spec.null_data = true;
  Tensor tensor = writable_view_of(import_or_die(producer, spec));
  auto data = tensor.mutable_data();
  ASSERT_FALSE(data.has_value());
  EXPECT_EQ(data.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(data.error().message.find("null"), std::string::npos) << data.error().message;
}

TEST(TensorMutableData, ReadOnlyAuthorityIsPermissionDenied) {
  CountingProducer producer;
  {
    Tensor imported = import_or_die(producer);
    auto data = imported.mutable_data();
    ASSERT_FALSE(data.has_value());
    EXPECT_EQ(data.error().code, ErrorCode::kPermissionDenied);
    EXPECT_NE(data.error().message.find("read-only"), std::string::npos) << data.error().message;
    EXPECT_NE(imported.data(), nullptr);  // reading stays allowed
  }
  EXPECT_EQ(producer.deleter_calls(), 1);
}

TEST(TensorMutableData, WriterAuthorityGivesTheFirstElement) {
  auto pool = TensorPool::create({PoolMemory::kHost, 0, 256, 1});
  ASSERT_TRUE(pool.has_value()) << pool.error().message;
  auto tensor = (*pool)->allocate(std::vector<std::int64_t>{4}, DLDataType{kDLInt, 32, 1});
  ASSERT_TRUE(tensor.has_value()) << tensor.error().message;
  auto data = tensor->mutable_data();
  ASSERT_TRUE(data.has_value()) << data.error().message;
  EXPECT_EQ(*data, tensor->data());
  static_cast<std::int32_t*>(*data)[3] = 7;
  EXPECT_EQ(tensor->data_as<std::int32_t>()[3], 7);
}

TEST(TensorHandles, ExplicitClaimsArePairedByTheCaller) {
  CountingProducer producer;
  const Tensor tensor = import_or_die(producer);
  auto reference = tracked(tensor);
  ASSERT_NE(reference, nullptr);
  tensor.retain_handle();
  tensor.retain_handle();
  EXPECT_EQ(reference->handle_claims(), 3);
  tensor.release_handle();
  tensor.release_handle();
  EXPECT_EQ(reference->handle_claims(), 1);
  EXPECT_EQ(reference->unpaired_releases(), 0u);
  const Tensor empty;
  empty.retain_handle();  // no context: nothing to claim
  empty.release_handle();
}

TEST(TensorSynchronization, ConstTensorWithoutContractIsNotImplemented) {
  CountingProducer producer;
  const Tensor tensor = import_or_die(producer);
  EXPECT_EQ(tensor.synchronize_for_consumer_stream(nullptr).error().code,
            ErrorCode::kNotImplemented);
  EXPECT_EQ(tensor.synchronize_for_host().error().code, ErrorCode::kNotImplemented);
  const Tensor empty;
  EXPECT_EQ(empty.synchronize_for_consumer_stream(nullptr).error().code,
            ErrorCode::kInvalidArgument);
}

// A new context carries the DLPack version the library was built with (Holoscan 5.0 writes its
// own, 1.3), never {0, 0}; one given back for reuse is as a new one.
TEST(ContextVersion, ANewOrRecycledContextCarriesThisBuildsVersion) {
  const DLManagedTensorContext context;
  EXPECT_EQ(context.tensor.version.major, HOLOSCAN_DLPACK_IMPL_VERSION_MAJOR);
  EXPECT_EQ(context.tensor.version.minor, HOLOSCAN_DLPACK_IMPL_VERSION_MINOR);
  EXPECT_EQ(context.tensor.flags, 0u);
  EXPECT_EQ(context.tensor.dl_tensor.data, nullptr);
  EXPECT_EQ(context.tensor.dl_tensor.ndim, 0);
  EXPECT_EQ(context.memory_reference, nullptr);
  const DLManagedTensorContext copy = context;
  EXPECT_EQ(copy.tensor.version.minor, HOLOSCAN_DLPACK_IMPL_VERSION_MINOR);

  DLManagedTensorContext* taken = detail::take_context();
  ASSERT_NE(taken, nullptr);
  taken->tensor.version = {1, 0};
  taken->tensor.flags = DLPACK_FLAG_BITMASK_IS_COPIED;
  detail::give_context(taken);
  DLManagedTensorContext* again = detail::take_context();  // this thread's list: the same one
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->tensor.version.major, HOLOSCAN_DLPACK_IMPL_VERSION_MAJOR);
  EXPECT_EQ(again->tensor.version.minor, HOLOSCAN_DLPACK_IMPL_VERSION_MINOR);
  EXPECT_EQ(again->tensor.flags, 0u);
  detail::give_context(again);
}

TEST(CopyMetadata, ContextFromAVersionedTensorTakesVersionAndFlags) {
  CountingProducer producer;
  TensorSpec spec;
  spec.version = {1, 1};
  spec.flags = DLPACK_FLAG_BITMASK_IS_COPIED;
  DLManagedTensorVersioned* managed = producer.make_versioned(spec);
  DLManagedTensorContext context;
  copy_dl_tensor_with_owned_metadata(context, *managed, {/*materialize_implicit_strides=*/true});
  EXPECT_EQ(context.tensor.version.major, 1u);
  EXPECT_EQ(context.tensor.version.minor, 1u);
  EXPECT_EQ(context.tensor.flags, DLPACK_FLAG_BITMASK_IS_COPIED);
  EXPECT_EQ(context.tensor.manager_ctx, nullptr);  // the producer's stay with the producer
  EXPECT_EQ(context.tensor.deleter, nullptr);
  EXPECT_EQ(context.tensor.dl_tensor.data, managed->dl_tensor.data);
  EXPECT_EQ(context.tensor.dl_tensor.shape, context.dl_shape.data());
  EXPECT_EQ(context.dl_shape, (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(context.dl_strides, (std::vector<std::int64_t>{3, 1}));
  // The context's own view as the source: shape and strides survive the copy onto itself.
  copy_dl_tensor_with_owned_metadata(context, context.tensor);
  EXPECT_EQ(context.dl_shape, (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(context.tensor.flags, DLPACK_FLAG_BITMASK_IS_COPIED);
  managed->deleter(managed);
  EXPECT_EQ(producer.deleter_calls(), 1);
}

TEST(CopyMetadata, ContextFromADLTensorIsThisBuildsVersionWithoutFlags) {
  std::vector<std::int64_t> shape{4};
  float values[4] = {};
  const DLTensor tensor{values, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, shape.data(), nullptr, 0};
  DLManagedTensorContext context;
  context.tensor.flags = DLPACK_FLAG_BITMASK_READ_ONLY;
  copy_dl_tensor_with_owned_metadata(context, tensor);
  EXPECT_EQ(context.tensor.version.major, HOLOSCAN_DLPACK_IMPL_VERSION_MAJOR);
  EXPECT_EQ(context.tensor.version.minor, HOLOSCAN_DLPACK_IMPL_VERSION_MINOR);
  EXPECT_EQ(context.tensor.flags, 0u);
  EXPECT_EQ(context.tensor.dl_tensor.strides, nullptr);  // not asked to write them out
  EXPECT_EQ(context.dl_shape, shape);
}

// A view with dimensions and no shape was given a shape of zeros (and, asked for them, strides made
// from those): a malformed view became a valid empty tensor, which an export then sent out. 5.0
// (read from its binary) leaves the shape, and so the strides it would make, null.
TEST(CopyMetadata, AViewWithoutAShapeKeepsNoneAs50Does) {
  float values[1] = {};
  const DLTensor shapeless{values, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, nullptr, nullptr, 0};
  DLTensor copy{};
  std::vector<std::int64_t> shape{7};
  std::vector<std::int64_t> strides{7};
  copy_dl_tensor_with_owned_metadata(shapeless, copy, shape, strides,
                                     {/*materialize_implicit_strides=*/true});
  EXPECT_EQ(copy.ndim, 2);
  EXPECT_EQ(copy.shape, nullptr);
  EXPECT_EQ(copy.strides, nullptr);
  EXPECT_TRUE(shape.empty());
  EXPECT_TRUE(strides.empty());

  auto context = std::make_shared<DLManagedTensorContext>();
  copy_dl_tensor_with_owned_metadata(*context, shapeless);
  EXPECT_EQ(context->tensor.dl_tensor.shape, nullptr);
  const Tensor tensor(context);
  auto exported = tensor.to_dlpack_versioned();
  ASSERT_FALSE(exported.has_value()) << "a view without a shape went out as a valid tensor";
  EXPECT_EQ(exported.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(exported.error().message.find("shape is null while ndim is 2"), std::string::npos)
      << exported.error().message;
}

// A source whose strides lie in the context's shape vector (or its shape in the strides vector),
// as a view written by hand may have them: both are read before either vector is written, which
// overwrote the strides with the new shape (or moved them, when the shape vector grew).
TEST(CopyMetadata, SourceArraysInTheOtherOwnedVectorAreReadBeforeItChanges) {
  float values[24] = {};
  DLManagedTensorContext context;
  context.dl_shape = {12, 4, 1};  // the source's strides, and no room for a fourth extent
  context.dl_shape.shrink_to_fit();
  std::vector<std::int64_t> shape{2, 3, 4};
  const DLTensor strided{
      values, {kDLCPU, 0}, 3, {kDLFloat, 32, 1}, shape.data(), context.dl_shape.data(), 0};
  copy_dl_tensor_with_owned_metadata(context, strided);
  EXPECT_EQ(context.dl_shape, (std::vector<std::int64_t>{2, 3, 4}));
  EXPECT_EQ(context.dl_strides, (std::vector<std::int64_t>{12, 4, 1}));
  std::vector<std::int64_t> four{1, 2, 3, 4};
  context.dl_strides = {24, 12, 4, 1};
  context.dl_shape = {1, 2, 3};
  context.dl_shape.shrink_to_fit();
  const DLTensor grown{
      values, {kDLCPU, 0}, 4, {kDLFloat, 32, 1}, four.data(), context.dl_strides.data(), 0};
  copy_dl_tensor_with_owned_metadata(context, grown);
  EXPECT_EQ(context.dl_shape, four);
  EXPECT_EQ(context.dl_strides, (std::vector<std::int64_t>{24, 12, 4, 1}));
  context.dl_strides.shrink_to_fit();
  const DLTensor swapped{
      values, {kDLCPU, 0}, 4, {kDLFloat, 32, 1}, context.dl_strides.data(), context.dl_shape.data(),
      0};
  copy_dl_tensor_with_owned_metadata(context, swapped);
  EXPECT_EQ(context.dl_shape, (std::vector<std::int64_t>{24, 12, 4, 1}));
  EXPECT_EQ(context.dl_strides, four);
}

// A context viewing `values` as 6x4 with its strides written out, in vectors without spare room:
// a larger copy into it must grow both.
std::unique_ptr<DLManagedTensorContext> tight_6x4_context(float* values) {
  auto context = std::make_unique<DLManagedTensorContext>();
  std::vector<std::int64_t> small{6, 4};
  const DLTensor view{values, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, small.data(), nullptr, 0};
  copy_dl_tensor_with_owned_metadata(*context, view, {/*materialize_implicit_strides=*/true});
  context->dl_shape.shrink_to_fit();
  context->dl_strides.shrink_to_fit();
  context->tensor.dl_tensor.shape = context->dl_shape.data();
  context->tensor.dl_tensor.strides = context->dl_strides.data();
  return context;
}

// The context's view points into its own vectors. A copy that the heap refused half-way (the
// shape's room grown and the old freed, then the strides' room refused) left the view pointing
// at the freed room: every later read of the context was a use after free. Whatever allocation
// fails, the context is left whole: its old view or the new one, in its own vectors.
TEST(CopyMetadata, ACopyTheHeapRefusesLeavesTheContextWhole) {
  float values[64] = {};
  std::vector<std::int64_t> shape{2, 2, 2, 2, 2};
  const DLTensor larger{values, {kDLCPU, 0}, 5, {kDLFloat, 32, 1}, shape.data(), nullptr, 0};
  std::unique_ptr<DLManagedTensorContext> context;
  bool threw = false;
  test::sweep_allocations(
      [&] {
        context = tight_6x4_context(values);
        threw = false;
      },
      [&] {
        try {
          copy_dl_tensor_with_owned_metadata(*context, larger,
                                             {/*materialize_implicit_strides=*/true});
        } catch (const std::bad_alloc&) {
          threw = true;
        }
      },
      [&](std::uint64_t skip) {
        const DLTensor& view = context->tensor.dl_tensor;
        ASSERT_EQ(view.shape, context->dl_shape.data()) << skip;
        ASSERT_EQ(view.strides, context->dl_strides.data()) << skip;
        const std::vector<std::int64_t> read(view.shape, view.shape + view.ndim);  // no UAF
        const std::vector<std::int64_t> strides(view.strides, view.strides + view.ndim);
        if (threw) {
          EXPECT_EQ(read, (std::vector<std::int64_t>{6, 4})) << skip;
          EXPECT_EQ(strides, (std::vector<std::int64_t>{4, 1})) << skip;
        } else {
          EXPECT_EQ(read, shape) << skip;
          EXPECT_EQ(strides, (std::vector<std::int64_t>{16, 8, 4, 2, 1})) << skip;
        }
      });
}

// The same for a context assigned from another: refused half-way, its view pointed into the
// other context's vectors (read after that context was gone) or at its own freed room.
TEST(ContextCopy, AnAssignmentTheHeapRefusesLeavesTheContextWhole) {
  float values[64] = {};
  std::vector<std::int64_t> shape{2, 2, 2, 2, 2};
  const DLTensor larger{values, {kDLCPU, 0}, 5, {kDLFloat, 32, 1}, shape.data(), nullptr, 0};
  std::unique_ptr<DLManagedTensorContext> context;
  std::unique_ptr<DLManagedTensorContext> other;
  bool threw = false;
  test::sweep_allocations(
      [&] {
        other = std::make_unique<DLManagedTensorContext>();
        copy_dl_tensor_with_owned_metadata(*other, larger, {/*materialize_implicit_strides=*/true});
        context = tight_6x4_context(values);
        threw = false;
      },
      [&] {
        try {
          *context = *other;
        } catch (const std::bad_alloc&) {
          threw = true;
        }
      },
      [&](std::uint64_t skip) {
        other.reset();  // the view must not read it any more
        const DLTensor& view = context->tensor.dl_tensor;
        ASSERT_EQ(view.shape, context->dl_shape.data()) << skip;
        ASSERT_EQ(view.strides, context->dl_strides.data()) << skip;
        const std::vector<std::int64_t> read(view.shape, view.shape + view.ndim);  // no UAF
        const std::vector<std::int64_t> old_shape{6, 4};
        EXPECT_EQ(read, threw ? old_shape : shape) << skip;
      });
}

// A hand-written view that points into the context's own vectors away from their start: a
// sub-view of dl_shape and dl_strides, or strides kept in dl_shape (as row 94's layout).
std::shared_ptr<DLManagedTensorContext> context_with_an_inner_view(float* values,
                                                                   bool strides_in_shape) {
  auto context = std::make_shared<DLManagedTensorContext>();
  context->dl_shape = {1, 2, 3, 3, 1};
  context->dl_strides = {6, 3, 1};
  DLTensor& view = context->tensor.dl_tensor;
  view.data = values;
  view.device = {kDLCPU, 0};
  view.ndim = 2;
  view.dtype = {kDLFloat, 32, 1};
  view.shape = context->dl_shape.data() + 1;  // {2, 3}
  view.strides = strides_in_shape ? context->dl_shape.data() + 3 : context->dl_strides.data() + 1;
  context->memory_reference = std::make_shared<TensorMemoryReference>();
  return context;
}

// A copied or assigned context keeps no pointer into the original's vectors, wherever in them
// its view pointed: the copy outlives the original and reads and exports its own values.
TEST(ContextCopy, AViewIntoTheVectorsAwayFromTheirStartPointsIntoTheCopys) {
  float values[6] = {0, 1, 2, 3, 4, 5};
  for (const bool strides_in_shape : {false, true}) {
    for (const int assign : {0, 1, 2}) {  // a copy; assigned into no room; into room enough
      auto source = context_with_an_inner_view(values, strides_in_shape);
      auto copy = std::make_shared<DLManagedTensorContext>();
      if (assign == 2) {
        copy->dl_shape.reserve(16);
        copy->dl_strides.reserve(16);
      }
      if (assign != 0) {
        *copy = *source;
      } else {
        copy = std::make_shared<DLManagedTensorContext>(*source);
      }
      const std::int64_t* const shape_in_source = source->tensor.dl_tensor.shape;
      const std::int64_t* const strides_in_source = source->tensor.dl_tensor.strides;
      EXPECT_EQ(copy->tensor.dl_tensor.shape, copy->dl_shape.data() + 1);
      EXPECT_EQ(copy->tensor.dl_tensor.strides,
                strides_in_shape ? copy->dl_shape.data() + 3 : copy->dl_strides.data() + 1);
      EXPECT_NE(copy->tensor.dl_tensor.shape, shape_in_source);
      EXPECT_NE(copy->tensor.dl_tensor.strides, strides_in_source);
      source.reset();  // the copy must not read it any more
      const Tensor tensor(copy);
      EXPECT_EQ(tensor.shape(), (std::vector<std::int64_t>{2, 3}));
      EXPECT_EQ(tensor.strides(), (std::vector<std::int64_t>{12, 4}));
      auto exported = tensor.to_dlpack_versioned();
      ASSERT_TRUE(exported.has_value()) << exported.error().message;
      EXPECT_EQ((*exported)->dl_tensor.shape[1], 3);
      EXPECT_EQ((*exported)->dl_tensor.strides[0], 3);
      (*exported)->deleter(*exported);
    }
  }
}

TEST(TypeStrings, StringViewNeedNotEndTheString) {
  const std::string text = "<f4 and more";
  auto parsed = dldatatype_from_typestr(std::string_view(text).substr(0, 3));
  ASSERT_TRUE(parsed.has_value()) << parsed.error().message;
  EXPECT_EQ(parsed->code, kDLFloat);
  EXPECT_EQ(parsed->bits, 32);
  auto rejected = dldatatype_from_typestr(std::string_view(text).substr(0, 5));
  ASSERT_FALSE(rejected.has_value());
  EXPECT_EQ(rejected.error().code, ErrorCode::kInvalidArgument);
  EXPECT_FALSE(dldatatype_from_typestr("<f+4").has_value());
  EXPECT_FALSE(dldatatype_from_typestr("<f04x").has_value());
}

// The refusals carry Holoscan 5.0's sentences; every '>' is refused, one byte too, as in 5.0.
TEST(TypeStrings, RefusalsSayWhatHoloscanSays) {
  const auto refusal = [](std::string_view typestr) {
    auto parsed = dldatatype_from_typestr(typestr);
    if (parsed.has_value()) {
      return std::string("accepted");
    }
    EXPECT_EQ(parsed.error().code, ErrorCode::kInvalidArgument);
    return parsed.error().message;
  };
  const std::string lead =
      "dldatatype_from_typestr: Failed to determine DLDataType from type string: ";
  EXPECT_EQ(refusal(">f4"), lead + "big endian types are not supported in '>f4'");
  EXPECT_EQ(refusal(">i1"), lead + "big endian types are not supported in '>i1'");
  EXPECT_EQ(refusal("<x4"), lead + "unsupported dtype.kind 'x' in '<x4'");
  EXPECT_EQ(refusal(""), lead + "unsupported dtype.kind '' in ''");
  EXPECT_EQ(refusal("<"), lead + "unsupported dtype.kind '' in '<'");
  EXPECT_EQ(refusal("<f"), lead + "missing itemsize in '<f'");
  EXPECT_EQ(refusal("<f3"), lead + "unsupported itemsize '3' in '<f3'");
  EXPECT_EQ(refusal("<i99999999999999999999"),
            lead + "unsupported itemsize '99999999999999999999' in '<i99999999999999999999'");
  EXPECT_EQ(refusal("xf4"), lead + "unsupported byte order 'x' in 'xf4'");
  auto boolean = dldatatype_from_typestr("|b1");  // ours: 5.0 refuses bool
  ASSERT_TRUE(boolean.has_value()) << boolean.error().message;
  EXPECT_EQ(boolean->code, kDLBool);
  auto one_byte = dldatatype_from_typestr("|i1");
  ASSERT_TRUE(one_byte.has_value()) << one_byte.error().message;
  EXPECT_EQ(one_byte->code, kDLInt);
  EXPECT_EQ(one_byte->bits, 8);
}

// With neither strides nor a shape there is nothing to derive strides from: 5.0 leaves them empty.
TEST(CalcStrides, NoShapeAndNoStridesGiveNone) {
  DLTensor tensor{};
  tensor.ndim = 3;
  tensor.dtype = DLDataType{kDLFloat, 32, 1};
  std::vector<std::int64_t> strides{7, 7};
  calc_strides(tensor, strides);
  EXPECT_TRUE(strides.empty());
  std::vector<std::int64_t> shape{2, 3, 4};
  tensor.shape = shape.data();
  calc_strides(tensor, strides);
  EXPECT_EQ(strides, (std::vector<std::int64_t>{48, 16, 4}));
  calc_strides(tensor, strides, /*to_num_elements=*/true);
  EXPECT_EQ(strides, (std::vector<std::int64_t>{12, 4, 1}));
}

// numpy_dtype names one lane, as Holoscan 5.0's does (it never reads `lanes`); bool is ours.
TEST(TypeStrings, NumpyDtypeNamesOneLane) {
  const auto name = [](DLDataType dtype) {
    auto typestr = numpy_dtype(dtype);
    return typestr.has_value() ? std::string(*typestr) : typestr.error().message;
  };
  EXPECT_EQ(name({kDLFloat, 32, 1}), "<f4");
  EXPECT_EQ(name({kDLFloat, 32, 4}), "<f4");
  EXPECT_EQ(name({kDLInt, 8, 16}), "|i1");
  EXPECT_EQ(name({kDLComplex, 128, 2}), "<c16");
  EXPECT_EQ(name({kDLBool, 8, 1}), "|b1");
  EXPECT_EQ(name({kDLBool, 8, 3}), "|b1");
  EXPECT_EQ(name({kDLBfloat, 16, 4}),
            "numpy_dtype: Failed to determine type string from DLDataType: unsupported (code=4, "
            "bits=16)");  // Holoscan 5.0's text, which names no lanes either
  auto refused = numpy_dtype({kDLFloat, 24, 1});
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, ErrorCode::kInvalidArgument);
}

// The former spellings stay, deprecated, and do what their replacements do.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
TEST(DeprecatedSpellings, ForwardToTheirReplacements) {
  CountingProducer producer;
  {
    const Tensor tensor = import_or_die(producer);
    EXPECT_EQ(tensor.read_only(), tensor.is_read_only());
    EXPECT_EQ(tensor.synchronize_for_consumer(nullptr).error().code, ErrorCode::kNotImplemented);
    EXPECT_EQ(tensor.export_dlpack().error().code, ErrorCode::kNotSupported);
    auto exported = tensor.export_dlpack_versioned();
    ASSERT_TRUE(exported.has_value()) << exported.error().message;
    (*exported)->deleter(*exported);
  }
  EXPECT_EQ(producer.deleter_calls(), 1);
}
#pragma GCC diagnostic pop

}  // namespace
}  // namespace holoscan
