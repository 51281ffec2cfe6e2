// Covers DLPack import: every rejected field (error code, field name, ownership left with the
// caller: no deleter call until the caller makes it) and the accepted shapes of tensors, for both
// the versioned and the legacy entry point.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstdint>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "holoscan/tensor.hpp"
#include "support/counting_producer.hpp"
#include "support/gtest_printers.hpp"

namespace holoscan {
namespace {

using test::CountingProducer;
using test::TensorSpec;

enum class Format { kVersioned, kLegacy };

void PrintTo(Format format, std::ostream* os) {
  *os << (format == Format::kVersioned ? "versioned" : "legacy");
}

std::string format_name(const ::testing::TestParamInfo<Format>& info) {
  return info.param == Format::kVersioned ? "Versioned" : "Legacy";
}

expected<Tensor> import(CountingProducer& producer, const TensorSpec& spec, Format format) {
  if (format == Format::kVersioned) {
    return make_tensor_from_dlpack_versioned(producer.make_versioned(spec));
  }
  return make_tensor_from_dlpack(producer.make_legacy(spec));
}

// A page that faults on any read: strides pointing into it must never be read.
class UnreadablePage {
 public:
  UnreadablePage()
      : page_(::mmap(nullptr, kBytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)) {}
  ~UnreadablePage() {
    if (page_ != MAP_FAILED) {
      (void)::munmap(page_, kBytes);
    }
  }
  UnreadablePage(const UnreadablePage&) = delete;
  UnreadablePage& operator=(const UnreadablePage&) = delete;
  bool ok() const { return page_ != MAP_FAILED; }
  std::int64_t* strides() const { return static_cast<std::int64_t*>(page_); }

 private:
  static constexpr std::size_t kBytes = 4096;
  void* page_;
};

// Rejection must name `field`, use kInvalidArgument and leave ownership with the caller: the
// deleter has not run, and runs exactly once when the caller calls it. With `unread_strides`,
// the producer's strides point there during the import (at memory that faults on any read): a
// field checked before the strides must fail without reading them.
void expect_rejected(const TensorSpec& spec, Format format, const std::string& field,
                     std::int64_t* unread_strides = nullptr) {
  CountingProducer producer;
  DLManagedTensorVersioned* versioned = nullptr;
  DLManagedTensor* legacy = nullptr;
  DLTensor* given = nullptr;
  std::int64_t* given_strides = nullptr;
  {
    expected<Tensor> result;
    if (format == Format::kVersioned) {
      versioned = producer.make_versioned(spec);
      given = &versioned->dl_tensor;
    } else {
      legacy = producer.make_legacy(spec);
      given = &legacy->dl_tensor;
    }
    if (unread_strides != nullptr) {
      given_strides = std::exchange(given->strides, unread_strides);
    }
    result = versioned != nullptr ? make_tensor_from_dlpack_versioned(versioned)
                                  : make_tensor_from_dlpack(legacy);
    if (unread_strides != nullptr) {
      given->strides = given_strides;  // the producer's own again, for its deleter
    }
    ASSERT_FALSE(result.has_value()) << "a tensor with a bad " << field << " was accepted";
    EXPECT_EQ(result.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(result.error().message.find(field), std::string::npos)
        << "message \"" << result.error().message << "\" does not name " << field;
  }
  EXPECT_EQ(producer.deleter_calls(), 0);
  if (versioned != nullptr) {
    versioned->deleter(versioned);
  } else {
    legacy->deleter(legacy);
  }
  EXPECT_EQ(producer.deleter_calls(), 1);
}

// The compact row-major strides (in elements) of `shape`.
std::vector<std::int64_t> compact_strides(const std::vector<std::int64_t>& shape) {
  std::vector<std::int64_t> strides(shape.size());
  std::int64_t stride = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= shape[i];
  }
  return strides;
}

std::vector<std::int64_t> as_vector(const std::int64_t* values, std::int32_t count) {
  return values == nullptr ? std::vector<std::int64_t>{}
                           : std::vector<std::int64_t>(values, values + count);
}

class ImportValidation : public ::testing::TestWithParam<Format> {};

INSTANTIATE_TEST_SUITE_P(BothFormats, ImportValidation,
                         ::testing::Values(Format::kVersioned, Format::kLegacy), format_name);

// --- rejected fields ---

TEST(ImportValidationNull, VersionedNullPointer) {
  const expected<Tensor> result = make_tensor_from_dlpack_versioned(nullptr);
  ASSERT_FALSE(result.has_value());
  EXPECT_EQ(result.error().code, ErrorCode::kInvalidArgument);
  EXPECT_FALSE(result.error().message.empty());
}

TEST(ImportValidationNull, LegacyNullPointer) {
  const expected<Tensor> result = make_tensor_from_dlpack(nullptr);
  ASSERT_FALSE(result.has_value());
  EXPECT_EQ(result.error().code, ErrorCode::kInvalidArgument);
  EXPECT_FALSE(result.error().message.empty());
}

// Every field after the version is garbage: only the version and the deleter may be read.
TensorSpec garbage_after_version(std::uint32_t major) {
  TensorSpec spec;
  spec.version = {major, 0};
  spec.flags = ~std::uint64_t{0};
  spec.ndim = -7;
  spec.null_shape = true;
  spec.dtype = {200, 0, 0};
  spec.device = {static_cast<DLDeviceType>(999), -3};
  spec.null_data = true;
  return spec;
}

TEST(ImportValidationVersion, MajorZeroLeavesOwnershipAndReadsNothingElse) {
  expect_rejected(garbage_after_version(0), Format::kVersioned, "version");
}

TEST(ImportValidationVersion, MajorTwoLeavesOwnershipAndReadsNothingElse) {
  expect_rejected(garbage_after_version(2), Format::kVersioned, "version");
}

TEST(ImportValidationVersion, MajorTwoMessageBlamesOnlyTheVersion) {
  CountingProducer producer;
  DLManagedTensorVersioned* managed = producer.make_versioned(garbage_after_version(2));
  {
    const expected<Tensor> result = make_tensor_from_dlpack_versioned(managed);
    ASSERT_FALSE(result.has_value());
    for (const char* other : {"ndim", "shape", "dtype", "device", "flags"}) {
      EXPECT_EQ(result.error().message.find(other), std::string::npos)
          << result.error().message << " mentions " << other;
    }
  }
  EXPECT_EQ(producer.deleter_calls(), 0);
  managed->deleter(managed);
  EXPECT_EQ(producer.deleter_calls(), 1);
}

TEST(ImportValidationFlags, UnknownFlagBit) {
  TensorSpec spec;
  spec.flags = DLPACK_FLAG_BITMASK_READ_ONLY | (std::uint64_t{1} << 20);
  expect_rejected(spec, Format::kVersioned, "flags");
}

TEST_P(ImportValidation, NegativeNdim) {
  TensorSpec spec;
  spec.ndim = -1;
  expect_rejected(spec, GetParam(), "ndim");
}

TEST_P(ImportValidation, NdimAboveMaximum) {
  TensorSpec spec;
  spec.shape.assign(kMaxTensorDims + 1, 1);  // valid memory, in case the bound is not checked
  ASSERT_EQ(spec.shape.size(), 65u);
  expect_rejected(spec, GetParam(), "ndim");
}

TEST_P(ImportValidation, NullShapeWithPositiveNdim) {
  TensorSpec spec;
  spec.null_shape = true;
  expect_rejected(spec, GetParam(), "shape");
}

TEST_P(ImportValidation, NegativeExtentNamesItsIndex) {
  TensorSpec spec;
  spec.shape = {2, -1, 4};
  expect_rejected(spec, GetParam(), "shape[1]");
}

TEST_P(ImportValidation, ZeroLanes) {
  TensorSpec spec;
  spec.dtype = {kDLFloat, 32, 0};
  expect_rejected(spec, GetParam(), "dtype.lanes");
}

TEST_P(ImportValidation, ZeroBits) {
  TensorSpec spec;
  spec.dtype = {kDLInt, 0, 1};
  expect_rejected(spec, GetParam(), "dtype.bits");
}

TEST_P(ImportValidation, UnknownTypeCode) {
  TensorSpec spec;
  spec.dtype = {200, 32, 1};
  expect_rejected(spec, GetParam(), "dtype.code");
}

TEST_P(ImportValidation, FloatOfTwelveBits) {
  TensorSpec spec;
  spec.dtype = {kDLFloat, 12, 1};
  expect_rejected(spec, GetParam(), "dtype.bits");
}

TEST_P(ImportValidation, UnknownDeviceType) {
  TensorSpec spec;
  spec.device = {static_cast<DLDeviceType>(999), 0};
  UnreadablePage page;  // also: the strides, checked after it, are not read
  ASSERT_TRUE(page.ok());
  expect_rejected(spec, GetParam(), "device.device_type", page.strides());
}

TEST_P(ImportValidation, NegativeDeviceId) {
  TensorSpec spec;
  spec.device = {kDLCPU, -1};
  UnreadablePage page;  // also: the strides, checked after it, are not read
  ASSERT_TRUE(page.ok());
  expect_rejected(spec, GetParam(), "device.device_id", page.strides());
}

TEST_P(ImportValidation, NullDataWithElements) {
  TensorSpec spec;
  spec.null_data = true;
  UnreadablePage page;  // also: the strides, checked after it, are not read
  ASSERT_TRUE(page.ok());
  expect_rejected(spec, GetParam(), "data", page.strides());
}

TEST_P(ImportValidation, ElementCountOverflow) {
  TensorSpec spec;
  spec.shape = {std::int64_t{1} << 40, std::int64_t{1} << 40};
  expect_rejected(spec, GetParam(), "overflow");
}

TEST_P(ImportValidation, ByteCountOverflow) {
  TensorSpec spec;
  spec.shape = {std::int64_t{1} << 31, std::int64_t{1} << 30};  // 2^61 float32: 2^63 bytes
  spec.dtype = {kDLFloat, 32, 1};
  expect_rejected(spec, GetParam(), "overflow");
}

TEST_P(ImportValidation, RejectionWithNullDeleterIsClean) {
  CountingProducer producer;
  TensorSpec spec;
  spec.ndim = -1;
  spec.null_deleter = true;
  const expected<Tensor> result = import(producer, spec, GetParam());
  ASSERT_FALSE(result.has_value());
  EXPECT_EQ(result.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(producer.deleter_calls(), 0);
}

// --- accepted tensors ---

TEST_P(ImportValidation, NullStridesBecomeCompactRowMajor) {
  CountingProducer producer;
  {
    TensorSpec spec;
    spec.shape = {2, 3, 4};
    spec.dtype = {kDLFloat, 32, 1};
    const expected<Tensor> result = import(producer, spec, GetParam());
    ASSERT_TRUE(result.has_value()) << result.error().message;
    EXPECT_EQ(result->shape(), (std::vector<std::int64_t>{2, 3, 4}));
    EXPECT_EQ(result->strides(), (std::vector<std::int64_t>{48, 16, 4}));
    ASSERT_NE(result->dl_tensor().strides, nullptr);
    EXPECT_EQ(as_vector(result->dl_tensor().strides, 3), (std::vector<std::int64_t>{12, 4, 1}));
    EXPECT_EQ(result->size(), 24);
    EXPECT_EQ(result->nbytes(), 96);
    EXPECT_TRUE(result->is_contiguous());
    EXPECT_EQ(producer.deleter_calls(), 0);
  }
  EXPECT_EQ(producer.deleter_calls(), 1);
}

TEST_P(ImportValidation, GivenStridesAreKeptAndReportedInBytes) {
  CountingProducer producer;
  {
    TensorSpec spec;
    spec.shape = {3, 2};
    spec.strides = std::vector<std::int64_t>{1, 3};  // the transpose of a compact 2x3
    spec.dtype = {kDLFloat, 64, 1};
    const expected<Tensor> result = import(producer, spec, GetParam());
    ASSERT_TRUE(result.has_value()) << result.error().message;
    EXPECT_EQ(result->strides(), (std::vector<std::int64_t>{8, 24}));
    EXPECT_EQ(as_vector(result->dl_tensor().strides, 2), (std::vector<std::int64_t>{1, 3}));
    EXPECT_FALSE(result->is_contiguous());
    EXPECT_EQ(producer.deleter_calls(), 0);
  }
  EXPECT_EQ(producer.deleter_calls(), 1);
}

TEST(ImportValidationStorage, ShapeAndStridesAreCopiedOutOfTheProducer) {
  CountingProducer producer;
  {
    TensorSpec spec;
    spec.shape = {4, 5};
    spec.strides = std::vector<std::int64_t>{5, 1};
    DLManagedTensorVersioned* managed = producer.make_versioned(spec);
    const std::int64_t* producer_shape = managed->dl_tensor.shape;
    const std::int64_t* producer_strides = managed->dl_tensor.strides;
    const expected<Tensor> result = make_tensor_from_dlpack_versioned(managed);
    ASSERT_TRUE(result.has_value()) << result.error().message;
    EXPECT_NE(result->dl_tensor().shape, producer_shape);
    EXPECT_NE(result->dl_tensor().strides, producer_strides);
    EXPECT_EQ(as_vector(result->dl_tensor().shape, 2), (std::vector<std::int64_t>{4, 5}));
    EXPECT_EQ(as_vector(result->dl_tensor().strides, 2), (std::vector<std::int64_t>{5, 1}));
  }
  EXPECT_EQ(producer.deleter_calls(), 1);
}

TEST_P(ImportValidation, ByteOffsetIsHonouredByData) {
  CountingProducer producer;
  {
    TensorSpec spec;
    spec.byte_offset = 24;
    void* raw_data = nullptr;
    expected<Tensor> result;
    if (GetParam() == Format::kVersioned) {
      DLManagedTensorVersioned* managed = producer.make_versioned(spec);
      raw_data = managed->dl_tensor.data;
      result = make_tensor_from_dlpack_versioned(managed);
    } else {
      DLManagedTensor* managed = producer.make_legacy(spec);
      raw_data = managed->dl_tensor.data;
      result = make_tensor_from_dlpack(managed);
    }
    ASSERT_TRUE(result.has_value()) << result.error().message;
    EXPECT_EQ(result->data(), static_cast<std::byte*>(raw_data) + 24);
    EXPECT_EQ(result->dl_tensor().data, raw_data);
    EXPECT_EQ(result->dl_tensor().byte_offset, 24u);
  }
  EXPECT_EQ(producer.deleter_calls(), 1);
}

TEST_P(ImportValidation, ZeroSizeTensorWithNullData) {
  CountingProducer producer;
  {
    TensorSpec spec;
    spec.shape = {0, 3};
    spec.null_data = true;
    const expected<Tensor> result = import(producer, spec, GetParam());
    ASSERT_TRUE(result.has_value()) << result.error().message;
    EXPECT_EQ(result->data(), nullptr);
    EXPECT_EQ(result->ndim(), 2);
    EXPECT_EQ(result->shape(), (std::vector<std::int64_t>{0, 3}));
    EXPECT_EQ(result->size(), 0);
    EXPECT_EQ(result->nbytes(), 0);
  }
  EXPECT_EQ(producer.deleter_calls(), 1);
}

TEST_P(ImportValidation, ZeroDimensionalTensorHasOneElement) {
  CountingProducer producer;
  {
    TensorSpec spec;
    spec.shape = {};
    spec.dtype = {kDLInt, 16, 1};
    const expected<Tensor> result = import(producer, spec, GetParam());
    ASSERT_TRUE(result.has_value()) << result.error().message;
    EXPECT_EQ(result->ndim(), 0);
    EXPECT_EQ(result->size(), 1);
    EXPECT_EQ(result->nbytes(), 2);
    EXPECT_TRUE(result->shape().empty());
    EXPECT_TRUE(result->strides().empty());
    EXPECT_NE(result->data(), nullptr);
  }
  EXPECT_EQ(producer.deleter_calls(), 1);
}

TEST_P(ImportValidation, ZeroDimensionalTensorMayHaveNullShape) {
  CountingProducer producer;
  {
    TensorSpec spec;
    spec.shape = {};
    spec.null_shape = true;
    const expected<Tensor> result = import(producer, spec, GetParam());
    ASSERT_TRUE(result.has_value()) << result.error().message;
    EXPECT_EQ(result->ndim(), 0);
    EXPECT_EQ(result->size(), 1);
  }
  EXPECT_EQ(producer.deleter_calls(), 1);
}

TEST(ImportValidationVersion, NewerMinorWithKnownFieldsIsAccepted) {
  CountingProducer producer;
  {
    TensorSpec spec;
    spec.version = {1, DLPACK_MINOR_VERSION + 5};
    spec.flags = DLPACK_FLAG_BITMASK_READ_ONLY;
    const expected<Tensor> result =
        make_tensor_from_dlpack_versioned(producer.make_versioned(spec));
    ASSERT_TRUE(result.has_value()) << result.error().message;
    EXPECT_TRUE(result->is_read_only());
    EXPECT_EQ(result->shape(), (std::vector<std::int64_t>{2, 3}));
  }
  EXPECT_EQ(producer.deleter_calls(), 1);
}

TEST(ImportValidationVersion, OlderMinorIsAccepted) {
  CountingProducer producer;
  {
    TensorSpec spec;
    spec.version = {1, 0};
    const expected<Tensor> result =
        make_tensor_from_dlpack_versioned(producer.make_versioned(spec));
    ASSERT_TRUE(result.has_value()) << result.error().message;
  }
  EXPECT_EQ(producer.deleter_calls(), 1);
}

TEST(ImportValidationFlags, ReadOnlyAndIsCopiedAreReported) {
  CountingProducer producer;
  {
    TensorSpec spec;
    spec.flags = DLPACK_FLAG_BITMASK_READ_ONLY | DLPACK_FLAG_BITMASK_IS_COPIED;
    const expected<Tensor> result =
        make_tensor_from_dlpack_versioned(producer.make_versioned(spec));
    ASSERT_TRUE(result.has_value()) << result.error().message;
    EXPECT_EQ(result->flags(), DLPACK_FLAG_BITMASK_READ_ONLY | DLPACK_FLAG_BITMASK_IS_COPIED);
    EXPECT_TRUE(result->is_read_only());
    EXPECT_TRUE(result->is_copied());
  }
  EXPECT_EQ(producer.deleter_calls(), 1);
}

TEST(ImportValidationFlags, EachFlagIsReportedAlone) {
  CountingProducer producer;
  {
    TensorSpec read_only;
    read_only.flags = DLPACK_FLAG_BITMASK_READ_ONLY;
    TensorSpec copied;
    copied.flags = DLPACK_FLAG_BITMASK_IS_COPIED;
    const expected<Tensor> a =
        make_tensor_from_dlpack_versioned(producer.make_versioned(read_only));
    const expected<Tensor> b = make_tensor_from_dlpack_versioned(producer.make_versioned(copied));
    ASSERT_TRUE(a.has_value()) << a.error().message;
    ASSERT_TRUE(b.has_value()) << b.error().message;
    EXPECT_EQ(a->flags(), DLPACK_FLAG_BITMASK_READ_ONLY);
    EXPECT_TRUE(a->is_read_only());
    EXPECT_FALSE(a->is_copied());
    EXPECT_EQ(b->flags(), DLPACK_FLAG_BITMASK_IS_COPIED);
    EXPECT_TRUE(b->is_read_only());  // every import has read-only authority, whatever its flags
    EXPECT_TRUE(b->is_copied());
  }
  EXPECT_EQ(producer.deleter_calls(), 2);
}

TEST(ImportValidationFlags, LegacyImportHasNoFlags) {
  CountingProducer producer;
  {
    const expected<Tensor> result = make_tensor_from_dlpack(producer.make_legacy());
    ASSERT_TRUE(result.has_value()) << result.error().message;
    EXPECT_EQ(result->flags(), 0u);
    EXPECT_TRUE(result->is_read_only());  // imported ownership establishes no local writer
    EXPECT_FALSE(result->is_copied());
    // Read as a current-version tensor.
    EXPECT_EQ(result->version().major, static_cast<std::uint32_t>(DLPACK_MAJOR_VERSION));
    EXPECT_EQ(result->version().minor, static_cast<std::uint32_t>(DLPACK_MINOR_VERSION));
  }
  EXPECT_EQ(producer.deleter_calls(), 1);
}

// Seven dims is one past the context's inline storage; 32 is the maximum.
void expect_many_dims_accepted(const std::vector<std::int64_t>& shape, Format format) {
  CountingProducer producer;
  {
    TensorSpec spec;
    spec.shape = shape;
    spec.dtype = {kDLUInt, 8, 1};
    const expected<Tensor> result = import(producer, spec, format);
    ASSERT_TRUE(result.has_value()) << result.error().message;
    std::int64_t elements = 1;
    for (std::int64_t extent : shape) {
      elements *= extent;
    }
    EXPECT_EQ(result->ndim(), static_cast<std::int32_t>(shape.size()));
    EXPECT_EQ(result->shape(), shape);
    EXPECT_EQ(result->strides(), compact_strides(shape));  // itemsize 1: bytes == elements
    EXPECT_EQ(as_vector(result->dl_tensor().strides, result->ndim()), compact_strides(shape));
    EXPECT_EQ(result->size(), elements);
    EXPECT_TRUE(result->is_contiguous());
    // And out again, every extent kept.
    auto exported = result->to_dlpack_versioned();
    ASSERT_TRUE(exported.has_value()) << exported.error().message;
    EXPECT_EQ(as_vector((*exported)->dl_tensor.shape, (*exported)->dl_tensor.ndim), shape);
    (*exported)->deleter(*exported);
  }
  EXPECT_EQ(producer.deleter_calls(), 1);
}

TEST_P(ImportValidation, SevenDimensions) {
  expect_many_dims_accepted({2, 1, 3, 1, 2, 1, 2}, GetParam());
}

TEST_P(ImportValidation, ThirtyTwoDimensions) {
  std::vector<std::int64_t> shape(32, 1);
  shape[0] = 2;
  shape[7] = 3;
  shape[31] = 2;
  expect_many_dims_accepted(shape, GetParam());
}

// NumPy 2 and CuPy make arrays of up to 64 dimensions, and Holoscan 5.0 imports them.
TEST_P(ImportValidation, SixtyFourDimensions) {
  ASSERT_EQ(kMaxTensorDims, 64);
  std::vector<std::int64_t> shape(kMaxTensorDims, 1);
  shape[0] = 2;
  shape[40] = 3;
  shape[63] = 2;
  expect_many_dims_accepted(shape, GetParam());
}

TEST_P(ImportValidation, KnownDataTypesAreAccepted) {
  const DLDataType types[] = {{kDLInt, 8, 1},    {kDLUInt, 64, 1},   {kDLFloat, 16, 1},
                              {kDLFloat, 64, 1}, {kDLBfloat, 16, 1}, {kDLComplex, 64, 1},
                              {kDLBool, 8, 1},   {kDLFloat, 32, 4}};
  const std::int64_t itemsizes[] = {1, 8, 2, 8, 2, 8, 1, 16};
  for (std::size_t i = 0; i < std::size(types); ++i) {
    CountingProducer producer;
    {
      TensorSpec spec;
      spec.dtype = types[i];
      const expected<Tensor> result = import(producer, spec, GetParam());
      ASSERT_TRUE(result.has_value()) << "type " << i << ": " << result.error().message;
      EXPECT_EQ(result->itemsize(), itemsizes[i]) << "type " << i;
      EXPECT_EQ(result->nbytes(), 6 * itemsizes[i]) << "type " << i;
    }
    EXPECT_EQ(producer.deleter_calls(), 1);
  }
}

TEST_P(ImportValidation, CudaDeviceTypesNeedNoDriverToImport) {
  for (DLDeviceType type : {kDLCUDA, kDLCUDAHost, kDLCUDAManaged}) {
    CountingProducer producer;
    {
      TensorSpec spec;
      spec.device = {type, 0};
      const expected<Tensor> result = import(producer, spec, GetParam());
      ASSERT_TRUE(result.has_value()) << "device " << type << ": " << result.error().message;
      EXPECT_EQ(result->device().device_type, type);
      EXPECT_EQ(result->device().device_id, 0);
    }
    EXPECT_EQ(producer.deleter_calls(), 1);
  }
}

TEST_P(ImportValidation, NullDeleterIsAccepted) {
  CountingProducer producer;
  {
    TensorSpec spec;
    spec.null_deleter = true;
    const expected<Tensor> result = import(producer, spec, GetParam());
    ASSERT_TRUE(result.has_value()) << result.error().message;
    EXPECT_EQ(result->size(), 6);
  }
  EXPECT_EQ(producer.deleter_calls(), 0);
}

}  // namespace
}  // namespace holoscan
