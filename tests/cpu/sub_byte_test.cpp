// Covers packed and padded sub-byte element types (DLPack >= 1.1): sizes computed without
// overflow, what byte strides mean for them, and the legacy export that cannot say "padded".
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "holoscan/tensor.hpp"
#include "holoscan/tensor_pool.hpp"
#include "support/counting_producer.hpp"
#include "support/gtest_printers.hpp"
#include "support/tensor_helpers.hpp"

#if DLPACK_MAJOR_VERSION > 1 || DLPACK_MINOR_VERSION >= 1

namespace holoscan {
namespace {

using test::CountingProducer;
using test::import_or_die;
using test::TensorSpec;
using test::writable_view_of;

constexpr DLDataType kFloat4{kDLFloat4_e2m1fn, 4, 1};
constexpr DLDataType kFloat6{kDLFloat6_e2m3fn, 6, 1};

TEST(SubByte, PackedFloat4SizesAndByteStrides) {
  CountingProducer producer;
  TensorSpec spec;
  spec.shape = {2, 8};
  spec.dtype = kFloat4;
  const Tensor tensor = import_or_die(producer, spec);
  EXPECT_EQ(tensor.size(), 16);
  EXPECT_EQ(tensor.nbytes(), 8);  // two elements a byte
  EXPECT_EQ(tensor.itemsize(), 1);
  // Byte strides are element strides times itemsize() (Holoscan 5.0), even when packed.
  EXPECT_EQ(tensor.strides(), (std::vector<std::int64_t>{8, 1}));
  EXPECT_EQ(tensor.dl_tensor().strides[0], 8);  // the exact element strides
  EXPECT_EQ(tensor.dl_tensor().strides[1], 1);
}

TEST(SubByte, PackedFloat6NegativeStrideKeepsItsSign) {
  CountingProducer producer;
  TensorSpec spec;
  spec.shape = {4, 4};
  spec.strides = std::vector<std::int64_t>{-4, 1};  // rows reversed
  spec.dtype = kFloat6;
  spec.byte_offset = 9;  // the last row starts 3 rows of 3 bytes in
  const Tensor tensor = import_or_die(producer, spec);
  EXPECT_EQ(tensor.nbytes(), 12);                                   // 16 elements of 6 bits
  EXPECT_EQ(tensor.strides(), (std::vector<std::int64_t>{-4, 1}));  // element strides x itemsize
}

// PyTorch exports float4_e2m1fn_x2 as two float4 lanes: a whole byte an element, as is float6
// in four lanes (three bytes); lanes that leave a part of a byte are refused.
TEST(SubByte, LanesFillingWholeBytesAreElementsOfWholeBytes) {
  CountingProducer producer;
  TensorSpec spec;
  spec.shape = {2, 4};
  spec.dtype = DLDataType{kDLFloat4_e2m1fn, 4, 2};
  const Tensor float4_x2 = import_or_die(producer, spec);
  EXPECT_EQ(float4_x2.itemsize(), 1);
  EXPECT_EQ(float4_x2.nbytes(), 8);
  EXPECT_EQ(float4_x2.strides(), (std::vector<std::int64_t>{4, 1}));
  auto exported = float4_x2.to_dlpack_versioned();
  ASSERT_TRUE(exported.has_value()) << exported.error().message;
  EXPECT_EQ((*exported)->dl_tensor.dtype.lanes, 2);
  EXPECT_EQ((*exported)->flags & DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED, 0u);
  (*exported)->deleter(*exported);

  CountingProducer float6_producer;
  spec.dtype = DLDataType{kDLFloat6_e3m2fn, 6, 4};
  const Tensor float6_x4 = import_or_die(float6_producer, spec);
  EXPECT_EQ(float6_x4.itemsize(), 3);
  EXPECT_EQ(float6_x4.nbytes(), 24);

  CountingProducer refused_producer;
  spec.dtype = DLDataType{kDLFloat4_e2m1fn, 4, 3};  // 12 bits: a byte and a half
  DLManagedTensorVersioned* managed = refused_producer.make_versioned(spec);
  auto refused = make_tensor_from_dlpack_versioned(managed);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(refused.error().message.find("dtype.bits 4 (lanes 3) does not match dtype.code 17"),
            std::string::npos)
      << refused.error().message;
  EXPECT_EQ(refused_producer.deleter_calls(), 0) << "a refusal leaves ownership with the caller";
  managed->deleter(managed);
  EXPECT_EQ(refused_producer.deleter_calls(), 1);

  // Padding is defined for one lane: lanes padded each, or together, would be read two ways.
  CountingProducer padded_producer;
  spec.dtype = DLDataType{kDLFloat4_e2m1fn, 4, 2};
  spec.flags = DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED;
  DLManagedTensorVersioned* padded = padded_producer.make_versioned(spec);
  auto padded_refused = make_tensor_from_dlpack_versioned(padded);
  ASSERT_FALSE(padded_refused.has_value());
  EXPECT_EQ(padded_refused.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(padded_refused.error().message.find(
                "dlpack_flags IS_SUBBYTE_TYPE_PADDED with dtype.lanes 2: padding is defined for "
                "one sub-byte lane"),
            std::string::npos)
      << padded_refused.error().message;
  padded->deleter(padded);
  EXPECT_EQ(padded_producer.deleter_calls(), 1);
}

TEST(SubByte, PaddedFloat4TakesAByteAnElement) {
  CountingProducer producer;
  TensorSpec spec;
  spec.shape = {2, 8};
  spec.dtype = kFloat4;
  spec.flags = DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED;
  const Tensor tensor = import_or_die(producer, spec);
  EXPECT_EQ(tensor.nbytes(), 16);
  EXPECT_EQ(tensor.strides(), (std::vector<std::int64_t>{8, 1}));
}

TEST(SubByte, PackedSizeNearInt64IsExact) {
  CountingProducer producer;
  TensorSpec spec;
  spec.shape = {(std::int64_t{1} << 61) - 1};  // 2^61 - 1 four-bit elements: 2^60 bytes, rounded
  spec.dtype = kFloat4;
  const Tensor tensor = import_or_die(producer, spec);  // only described: its data is never read
  EXPECT_EQ(tensor.nbytes(), std::int64_t{1} << 60);
}

TEST(SubByte, PackedFloat6SizeNearInt64IsExact) {
  CountingProducer producer;
  TensorSpec spec;
  spec.shape = {INT64_MAX / 6};  // the bit count overflows int64, the byte count does not
  spec.dtype = kFloat6;
  const Tensor tensor = import_or_die(producer, spec);
  EXPECT_EQ(tensor.nbytes(), std::int64_t{1152921504606846976});  // ceil(6 * (2^63 - 1) / 6 / 8)
}

// Found by the import fuzzer: the span of explicit packed strides was counted a byte an element,
// so the export of an accepted float4 {INT64_MAX} tensor was refused on re-import.
TEST(SubByte, ExplicitPackedStridesSpanLikeCompactOnes) {
  CountingProducer producer;
  TensorSpec spec;
  spec.shape = {INT64_MAX};
  spec.dtype = kFloat4;
  spec.byte_offset = 182;
  const Tensor tensor = import_or_die(producer, spec);
  DLManagedTensorVersioned* exported = tensor.to_dlpack_versioned().value();
  ASSERT_NE(exported->dl_tensor.strides, nullptr);
  auto again = make_tensor_from_dlpack_versioned(exported);
  ASSERT_TRUE(again.has_value()) << again.error().message;
  EXPECT_EQ(again->nbytes(), tensor.nbytes());
}

TEST(SubByte, LegacyExportOfPaddedTensorIsRefused) {
  CountingProducer producer;
  TensorSpec spec;
  spec.shape = {8};
  spec.dtype = kFloat4;
  spec.flags = DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED;
  const Tensor tensor = writable_view_of(import_or_die(producer, spec));
  auto legacy = tensor.to_dlpack();
  ASSERT_FALSE(legacy.has_value());
  EXPECT_EQ(legacy.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(legacy.error().message.find("IS_SUBBYTE_TYPE_PADDED"), std::string::npos);
  // The versioned export says it, and reads back the same bytes.
  DLManagedTensorVersioned* versioned = tensor.to_dlpack_versioned().value();
  EXPECT_NE(versioned->flags & DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED, 0u);
  auto again = make_tensor_from_dlpack_versioned(versioned);
  ASSERT_TRUE(again.has_value()) << again.error().message;
  EXPECT_EQ(again->nbytes(), 8);
}

TEST(SubByte, LegacyExportOfPackedTensorKeepsItsBytes) {
  CountingProducer producer;
  TensorSpec spec;
  spec.shape = {8};
  spec.dtype = kFloat4;
  const Tensor tensor = writable_view_of(import_or_die(producer, spec));
  auto again = make_tensor_from_dlpack(tensor.to_dlpack().value());
  ASSERT_TRUE(again.has_value()) << again.error().message;
  EXPECT_EQ(again->nbytes(), 4);  // packed both ways: no flag needed
}

TEST(SubByte, PoolRejectsPackedOverflow) {
  auto pool = TensorPool::create({PoolMemory::kHost, 0, 256, 1});
  ASSERT_TRUE(pool.has_value()) << pool.error().message;
  auto refused = (*pool)->allocate({INT64_MAX / 6}, kFloat6);  // 6 bits each: overflows bits
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(refused.error().message.find("1152921504606846976 bytes do not fit"), std::string::npos)
      << refused.error().message;
  auto fits = (*pool)->allocate({100}, kFloat6);  // 75 bytes
  ASSERT_TRUE(fits.has_value()) << fits.error().message;
  EXPECT_EQ(fits->nbytes(), 75);
}

}  // namespace
}  // namespace holoscan

#endif  // DLPack >= 1.1
