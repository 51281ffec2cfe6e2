// Code written the way Holoscan operators and Holoscan's own sources use this layer: includes at
// Holoscan's paths, contexts built by hand, raw DLPack constructors, a Tensor subclass reaching
// dl_ctx_, raw-pointer exports, the error idioms and the free helpers. That it compiles is half
// the test; the rest checks that it behaves as Holoscan 5.0 documents.
#include <holoscan/core/domain/dlpack.hpp>
#include <holoscan/core/domain/tensor.hpp>
#include <holoscan/core/errors.hpp>
#include <holoscan/core/expected.hpp>
#include <holoscan/dlpack_utils.hpp>

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

// --- declarations as Holoscan spells them -------------------------------------------------------

using holoscan::Tensor;
static_assert(std::is_same_v<decltype(std::declval<const Tensor&>().itemsize()), std::size_t>);
static_assert(std::is_same_v<decltype(std::declval<const Tensor&>().ndim()), int32_t>);
static_assert(std::is_same_v<decltype(std::declval<const Tensor&>().size()), int64_t>);
static_assert(std::is_same_v<decltype(std::declval<const Tensor&>().nbytes()), int64_t>);
static_assert(std::is_same_v<decltype(std::declval<const Tensor&>().data()), void*>);
static_assert(
    std::is_same_v<decltype(std::declval<const Tensor&>().data_as<float>()), const float*>);
static_assert(
    std::is_same_v<decltype(std::declval<const Tensor&>().shape()), std::vector<int64_t>>);
static_assert(
    std::is_same_v<decltype(std::declval<const Tensor&>().strides()), std::vector<int64_t>>);
static_assert(std::is_same_v<decltype(std::declval<const Tensor&>().device()), DLDevice>);
static_assert(std::is_same_v<decltype(std::declval<const Tensor&>().dtype()), DLDataType>);
static_assert(std::is_same_v<decltype(std::declval<const Tensor&>().to_dlpack()),
                             holoscan::expected<DLManagedTensor*, holoscan::Error>>);
static_assert(std::is_same_v<decltype(std::declval<const Tensor&>().to_dlpack_versioned()),
                             holoscan::expected<DLManagedTensorVersioned*, holoscan::Error>>);
static_assert(std::is_same_v<decltype(std::declval<Tensor&>().dl_ctx()),
                             std::shared_ptr<holoscan::DLManagedTensorContext>&>);
static_assert(
    std::is_same_v<decltype(std::declval<Tensor&>().set_deallocation_stream(nullptr)), bool>);
static_assert(std::has_virtual_destructor_v<Tensor>);
static_assert(std::is_default_constructible_v<holoscan::DLManagedTensorContext>);
static_assert(
    std::is_same_v<decltype(holoscan::DLManagedTensorContext::tensor), DLManagedTensorVersioned>);
static_assert(std::is_same_v<decltype(holoscan::DLManagedTensorContext::memory_reference),
                             std::shared_ptr<holoscan::TensorMemoryReference>>);
static_assert(
    std::is_same_v<decltype(holoscan::DLManagedTensorContext::dl_shape), std::vector<int64_t>>);
static_assert(
    std::is_same_v<decltype(holoscan::DLManagedTensorContext::dl_strides), std::vector<int64_t>>);
static_assert(
    std::is_base_of_v<holoscan::TensorMemoryReference, holoscan::DLManagedMemoryBufferVersioned>);
static_assert(std::is_base_of_v<std::runtime_error, holoscan::RuntimeError>);
static_assert(!std::is_constructible_v<Tensor, holoscan::DLManagedTensorContext*>);
static_assert(std::is_same_v<decltype(holoscan::make_tensor_from_dlpack_versioned(nullptr)),
                             holoscan::expected<Tensor, holoscan::Error>>);
static_assert(
    std::is_same_v<decltype(holoscan::dlpack_dtype_item_size_bytes(DLDataType{})), uint64_t>);
static_assert(noexcept(holoscan::dlpack_dtype_item_size_bytes(DLDataType{})));
static_assert(std::is_same_v<decltype(holoscan::synchronize_cuda_streams(nullptr, nullptr)),
                             holoscan::expected<void, holoscan::Error>>);
static_assert(static_cast<int>(holoscan::ErrorCode::kInvalidArgument) == 4);
static_assert(static_cast<int>(holoscan::ErrorCode::kNotImplemented) == 7);
static_assert(holoscan::HOLOSCAN_DLPACK_IMPL_VERSION_MAJOR == DLPACK_MAJOR_VERSION);
static_assert(holoscan::HOLOSCAN_DLPACK_IMPL_VERSION_MINOR == DLPACK_MINOR_VERSION);

// --- a producer of raw DLPack tensors, as another framework would hand them over ----------------

struct Producer {
  std::array<float, 6> values{0, 1, 2, 3, 4, 5};
  std::array<int64_t, 2> shape{2, 3};
  int deleter_calls = 0;
  DLManagedTensorVersioned versioned{};
  DLManagedTensor legacy{};

  Producer() {
    versioned.version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
    versioned.manager_ctx = this;
    versioned.deleter = [](DLManagedTensorVersioned* self) {
      ++static_cast<Producer*>(self->manager_ctx)->deleter_calls;
    };
    versioned.dl_tensor = view();
    legacy.manager_ctx = this;
    legacy.deleter = [](DLManagedTensor* self) {
      ++static_cast<Producer*>(self->manager_ctx)->deleter_calls;
    };
    legacy.dl_tensor = view();
  }
  DLTensor view() {
    DLTensor tensor{};
    tensor.data = values.data();
    tensor.device = {kDLCPU, 0};
    tensor.ndim = 2;
    tensor.dtype = {kDLFloat, 32, 1};
    tensor.shape = shape.data();
    return tensor;
  }
};

// --- Holoscan-style user code -------------------------------------------------------------------

// A memory reference with no overrides that owns a host buffer (the RTI Connext module's idiom).
class VectorBufferReference final : public holoscan::TensorMemoryReference {
 public:
  explicit VectorBufferReference(std::size_t bytes) : storage_(bytes) {}
  uint8_t* data() { return storage_.data(); }

 private:
  std::vector<uint8_t> storage_;
};

// A subclass of Tensor, as Holoscan's Python tensor is one, reaching the protected context.
class OperatorTensor : public Tensor {
 public:
  OperatorTensor() = default;
  explicit OperatorTensor(std::shared_ptr<holoscan::DLManagedTensorContext>& ctx) : Tensor(ctx) {}

  static std::shared_ptr<OperatorTensor> from_dlpack(DLManagedTensorVersioned* managed) {
    auto imported = holoscan::make_tensor_from_dlpack_versioned(managed);
    if (!imported) {
      throw holoscan::RuntimeError(imported.error());
    }
    return std::make_shared<OperatorTensor>(imported->dl_ctx());
  }
  int64_t first_extent() const { return dl_ctx_->tensor.dl_tensor.shape[0]; }
  std::size_t owners() const { return static_cast<std::size_t>(dl_ctx_.use_count()); }
};

// A Holoscan operator's way to build a tensor over its own storage.
Tensor wrap_host_storage(int64_t rows, int64_t cols) {
  auto storage = std::make_shared<VectorBufferReference>(rows * cols * sizeof(float));
  auto ctx = std::make_shared<holoscan::DLManagedTensorContext>();
  ctx->memory_reference = storage;
  ctx->dl_shape = {rows, cols};
  holoscan::calc_strides(
      DLTensor{
          storage->data(), {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, ctx->dl_shape.data(), nullptr, 0},
      ctx->dl_strides, /*to_num_elements=*/true);
  ctx->tensor.version = {holoscan::HOLOSCAN_DLPACK_IMPL_VERSION_MAJOR,
                         holoscan::HOLOSCAN_DLPACK_IMPL_VERSION_MINOR};
  auto& dl = ctx->tensor.dl_tensor;
  dl.data = storage->data();
  dl.device = {kDLCPU, 0};
  dl.ndim = 2;
  dl.dtype = {kDLFloat, 32, 1};
  dl.shape = ctx->dl_shape.data();
  dl.strides = ctx->dl_strides.data();
  return Tensor(ctx);
}

// The error idioms of Holoscan's sources: forward a failure, or build one.
holoscan::expected<int64_t, holoscan::Error> first_extent_of(DLManagedTensorVersioned* managed) {
  auto tensor = holoscan::make_tensor_from_dlpack_versioned(managed);
  if (!tensor) {
    return holoscan::forward_error(tensor);
  }
  if (tensor->ndim() == 0) {
    return holoscan::make_unexpected(
        holoscan::Error{holoscan::ErrorCode::kInvalidArgument, "a scalar has no first extent"});
  }
  return tensor->shape()[0];
}

holoscan::expected<void, holoscan::Error> require_float(const Tensor& tensor) {
  if (tensor.dtype().code != kDLFloat) {
    return holoscan::error_detail::unexpected_runtime_error(holoscan::ErrorCode::kInvalidArgument,
                                                            "expected a float tensor");
  }
  return {};
}

// --- construction and access --------------------------------------------------------------------

TEST(HoloscanStyle, TensorOverAHandBuiltContext) {
  Tensor tensor = wrap_host_storage(2, 4);
  ASSERT_TRUE(tensor.data() != nullptr);
  EXPECT_EQ(tensor.shape(), (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(tensor.strides(), (std::vector<int64_t>{16, 4}));
  EXPECT_EQ(tensor.itemsize(), 4);
  EXPECT_EQ(tensor.nbytes(), 32);
  EXPECT_TRUE(tensor.is_contiguous());
  EXPECT_FALSE(tensor.is_read_only());  // a context starts with writable authority
  auto* values = static_cast<float*>(tensor.data());
  values[5] = 2.5f;
  EXPECT_EQ(tensor.data_as<float>()[5], 2.5f);
  const Tensor copy = tensor;  // NOLINT(performance-unnecessary-copy-initialization)
  EXPECT_EQ(copy.dl_ctx().get(), tensor.dl_ctx().get());
  EXPECT_TRUE(require_float(copy).has_value());
}

TEST(HoloscanStyle, ContextCopiesOwnTheirShape) {
  Tensor tensor = wrap_host_storage(3, 5);
  holoscan::DLManagedTensorContext copy = *tensor.dl_ctx();
  EXPECT_EQ(copy.tensor.dl_tensor.shape, copy.dl_shape.data());
  EXPECT_NE(copy.tensor.dl_tensor.shape, tensor.dl_ctx()->dl_shape.data());
  EXPECT_EQ(copy.tensor.dl_tensor.strides, copy.dl_strides.data());
  EXPECT_EQ(copy.tensor.dl_tensor.shape[1], 5);
}

TEST(HoloscanStyle, RawDLPackConstructorsTakeOwnership) {
  Producer producer;
  {
    Tensor versioned(&producer.versioned);
    EXPECT_EQ(versioned.size(), 6);
    EXPECT_TRUE(versioned.is_read_only());
  }
  EXPECT_EQ(producer.deleter_calls, 1);
  {
    Tensor legacy(&producer.legacy);
    EXPECT_EQ(legacy.shape(), (std::vector<int64_t>{2, 3}));
    EXPECT_TRUE(legacy.is_read_only());
    EXPECT_EQ(legacy.version().major, holoscan::HOLOSCAN_DLPACK_IMPL_VERSION_MAJOR);
  }
  EXPECT_EQ(producer.deleter_calls, 2);
}

TEST(HoloscanStyle, SubclassReachesTheContext) {
  Producer producer;
  {
    auto tensor = OperatorTensor::from_dlpack(&producer.versioned);
    EXPECT_EQ(tensor->first_extent(), 2);
    EXPECT_EQ(tensor->owners(), 1u);
    std::shared_ptr<Tensor> as_base = tensor;
    EXPECT_EQ(as_base->ndim(), 2);
    auto memory = std::dynamic_pointer_cast<holoscan::DLManagedMemoryBufferVersioned>(
        tensor->dl_ctx()->memory_reference);
    ASSERT_NE(memory, nullptr);
    EXPECT_EQ(memory->handle_claims(), 1);
    as_base.reset();
    tensor.reset();  // virtual destruction through the subclass releases the claim
    EXPECT_EQ(memory->handle_claims(), 0);
    EXPECT_EQ(producer.deleter_calls, 0);  // `memory` still owns the producer
  }
  EXPECT_EQ(producer.deleter_calls, 1);
}

TEST(HoloscanStyle, ExportsAreOwningPointersInExpected) {
  Tensor tensor = wrap_host_storage(2, 2);
  auto versioned_result = tensor.to_dlpack_versioned();
  ASSERT_TRUE(versioned_result) << versioned_result.error().message;
  // A writable tensor's export is its one mutable export until its deleter runs (5.0's rule).
  auto refused = tensor.to_dlpack();
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, holoscan::ErrorCode::kNotSupported);
  DLManagedTensorVersioned* versioned = *versioned_result;
  tensor = Tensor();  // the export keeps the storage alive
  static_cast<float*>(versioned->dl_tensor.data)[3] = 1.0f;
  EXPECT_EQ(versioned->version.major, static_cast<uint32_t>(DLPACK_MAJOR_VERSION));
  EXPECT_EQ(versioned->version.minor, static_cast<uint32_t>(DLPACK_MINOR_VERSION));
  EXPECT_EQ(versioned->flags, 0u);
  ASSERT_NE(versioned->dl_tensor.strides, nullptr);
  EXPECT_EQ(versioned->dl_tensor.strides[0], 2);
  versioned->deleter(versioned);

  Tensor again = wrap_host_storage(2, 2);
  auto legacy_result = again.to_dlpack();
  ASSERT_TRUE(legacy_result) << legacy_result.error().message;
  DLManagedTensor* legacy = *legacy_result;
  again = Tensor();
  static_cast<float*>(legacy->dl_tensor.data)[3] = 1.0f;
  legacy->deleter(legacy);
}

TEST(HoloscanStyle, ErrorIdioms) {
  Producer producer;
  producer.versioned.version.major = DLPACK_MAJOR_VERSION + 1;
  auto result = first_extent_of(&producer.versioned);
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().code, holoscan::ErrorCode::kInvalidArgument);
  EXPECT_EQ(producer.deleter_calls, 0);  // rejected: still the caller's
  try {
    throw holoscan::RuntimeError(result.error());
  } catch (const holoscan::RuntimeError& error) {
    EXPECT_EQ(error.code(), holoscan::ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(error.what()).find("version.major"), std::string::npos);
  }
  producer.versioned.version.major = DLPACK_MAJOR_VERSION;
  auto accepted = first_extent_of(&producer.versioned);
  ASSERT_TRUE(accepted) << accepted.error().message;
  EXPECT_EQ(*accepted, 2);
  EXPECT_EQ(producer.deleter_calls, 1);
}

TEST(HoloscanStyle, FreeHelpers) {
  EXPECT_EQ(holoscan::dlpack_dtype_item_size_bytes(DLDataType{kDLFloat, 32, 4}), 16u);
  EXPECT_EQ(holoscan::dlpack_dtype_item_size_bytes(DLDataType{kDLBool, 8, 1}), 1u);
  auto float32 = holoscan::dldatatype_from_typestr("<f4");
  ASSERT_TRUE(float32);
  EXPECT_EQ(float32->code, kDLFloat);
  EXPECT_EQ(float32->bits, 32);
  EXPECT_STREQ(*holoscan::numpy_dtype(*float32), "<f4");
  EXPECT_FALSE(holoscan::dldatatype_from_typestr(">f4"));
  EXPECT_TRUE(holoscan::dlpack_version_requires_explicit_strides(DLPackVersion{1, 2}));
  EXPECT_FALSE(holoscan::dlpack_version_requires_explicit_strides(DLPackVersion{1, 1}));
  auto host = holoscan::dldevice_from_pointer(&float32);
  ASSERT_TRUE(host) << host.error().message;
  EXPECT_EQ(host->device_type, kDLCPU);

  Producer producer;
  DLTensor copy{};
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  holoscan::DLPackMetadataCopyOptions options;
  options.materialize_implicit_strides = true;
  holoscan::copy_dl_tensor_with_owned_metadata(producer.versioned.dl_tensor, copy, shape, strides,
                                               options);
  EXPECT_EQ(copy.shape, shape.data());
  EXPECT_EQ(strides, (std::vector<int64_t>{3, 1}));
  holoscan::copy_dl_tensor_with_owned_metadata(producer.versioned.dl_tensor, copy, shape, strides);
  EXPECT_EQ(copy.strides, nullptr);
  EXPECT_TRUE(strides.empty());
}

// --- section 3: ownership on every rejection, read-only narrowing -------------------------------

struct Rejection {
  const char* name;
  const char* field;  // named in the message
  void (*spoil)(DLManagedTensorVersioned&);
};

class RejectedImport : public ::testing::TestWithParam<Rejection> {};

TEST_P(RejectedImport, LeavesOwnershipWithTheCaller) {
  const Rejection& rejection = GetParam();
  Producer producer;
  std::array<int64_t, 2> strides{3, 1};
  producer.versioned.dl_tensor.strides = strides.data();
  rejection.spoil(producer.versioned);

  auto result = holoscan::make_tensor_from_dlpack_versioned(&producer.versioned);
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().code, holoscan::ErrorCode::kInvalidArgument);
  EXPECT_NE(result.error().message.find(rejection.field), std::string::npos)
      << result.error().message;
  EXPECT_EQ(producer.deleter_calls, 0);
  try {
    Tensor thrown(&producer.versioned);
    ADD_FAILURE() << "Tensor(DLManagedTensorVersioned*) accepted it";
  } catch (const holoscan::RuntimeError& error) {
    EXPECT_EQ(error.code(), holoscan::ErrorCode::kInvalidArgument);
  }
  EXPECT_EQ(producer.deleter_calls, 0);
  producer.versioned.deleter(&producer.versioned);  // the caller may dispose of it
  EXPECT_EQ(producer.deleter_calls, 1);
}

const Rejection kRejections[] = {
    {"NewerMajor", "version", [](DLManagedTensorVersioned& m) { m.version.major += 1; }},
    {"OlderMajor", "version", [](DLManagedTensorVersioned& m) { m.version.major = 0; }},
    {"UnknownFlag", "flags", [](DLManagedTensorVersioned& m) { m.flags = uint64_t{1} << 40; }},
    {"NegativeNdim", "ndim", [](DLManagedTensorVersioned& m) { m.dl_tensor.ndim = -1; }},
    {"TooManyDims", "ndim", [](DLManagedTensorVersioned& m) { m.dl_tensor.ndim = 65; }},
    {"NullShape", "shape", [](DLManagedTensorVersioned& m) { m.dl_tensor.shape = nullptr; }},
    {"NegativeExtent", "shape[1]", [](DLManagedTensorVersioned& m) { m.dl_tensor.shape[1] = -3; }},
    {"ZeroLanes", "dtype.lanes", [](DLManagedTensorVersioned& m) { m.dl_tensor.dtype.lanes = 0; }},
    {"ZeroBits", "dtype.bits", [](DLManagedTensorVersioned& m) { m.dl_tensor.dtype.bits = 0; }},
    {"OddBits", "dtype.bits", [](DLManagedTensorVersioned& m) { m.dl_tensor.dtype.bits = 12; }},
    {"UnknownCode", "dtype.code", [](DLManagedTensorVersioned& m) { m.dl_tensor.dtype.code = 99; }},
    {"UnknownDevice", "device.device_type",
     [](DLManagedTensorVersioned& m) { m.dl_tensor.device.device_type = DLDeviceType(99); }},
    {"NegativeDeviceId", "device.device_id",
     [](DLManagedTensorVersioned& m) { m.dl_tensor.device.device_id = -1; }},
    {"NullData", "data", [](DLManagedTensorVersioned& m) { m.dl_tensor.data = nullptr; }},
    {"CountOverflow", "overflow",
     [](DLManagedTensorVersioned& m) {
       m.dl_tensor.shape[0] = INT64_MAX / 2;
       m.dl_tensor.shape[1] = 3;
     }},
    {"StrideBytes", "strides[0]",
     [](DLManagedTensorVersioned& m) { m.dl_tensor.strides[0] = INT64_MAX / 2; }},
    {"ByteOffset", "byte_offset",
     [](DLManagedTensorVersioned& m) { m.dl_tensor.byte_offset = uint64_t{1} << 63; }},
    {"Span", "span",
     [](DLManagedTensorVersioned& m) {
       m.dl_tensor.shape[0] = 3;
       m.dl_tensor.strides[0] = INT64_MAX / 4;
     }},
};

INSTANTIATE_TEST_SUITE_P(EveryField, RejectedImport, ::testing::ValuesIn(kRejections),
                         [](const ::testing::TestParamInfo<Rejection>& param) {
                           return std::string(param.param.name);
                         });

TEST(RejectedImport, NullPointersAreInvalidArguments) {
  EXPECT_EQ(holoscan::make_tensor_from_dlpack_versioned(nullptr).error().code,
            holoscan::ErrorCode::kInvalidArgument);
  EXPECT_EQ(holoscan::make_tensor_from_dlpack(nullptr).error().code,
            holoscan::ErrorCode::kInvalidArgument);
  EXPECT_THROW(Tensor(static_cast<DLManagedTensor*>(nullptr)), holoscan::RuntimeError);
}

TEST(RejectedImport, LegacyRejectionAlsoLeavesOwnership) {
  Producer producer;
  producer.legacy.dl_tensor.ndim = -4;
  EXPECT_FALSE(holoscan::make_tensor_from_dlpack(&producer.legacy));
  EXPECT_EQ(producer.deleter_calls, 0);
  producer.legacy.deleter(&producer.legacy);
  EXPECT_EQ(producer.deleter_calls, 1);
}

TEST(ReadOnlyAuthority, ImportsAreNarrowedWhateverTheFlags) {
  Producer producer;
  producer.versioned.flags = DLPACK_FLAG_BITMASK_IS_COPIED;  // writable, says the producer
  {
    auto tensor = holoscan::make_tensor_from_dlpack_versioned(&producer.versioned);
    ASSERT_TRUE(tensor) << tensor.error().message;
    EXPECT_TRUE(tensor->is_read_only());
    EXPECT_EQ(tensor->flags(), DLPACK_FLAG_BITMASK_IS_COPIED);  // the producer's bits, unchanged
    const Tensor copy = *tensor;       // NOLINT(performance-unnecessary-copy-initialization)
    EXPECT_TRUE(copy.is_read_only());  // copies share the authority

    DLManagedTensorVersioned* exported = copy.to_dlpack_versioned().value();
    EXPECT_EQ(exported->flags, DLPACK_FLAG_BITMASK_IS_COPIED | DLPACK_FLAG_BITMASK_READ_ONLY);
    auto again = holoscan::make_tensor_from_dlpack_versioned(exported);
    ASSERT_TRUE(again) << again.error().message;
    EXPECT_TRUE(again->is_read_only());
    EXPECT_EQ(again->flags(), DLPACK_FLAG_BITMASK_IS_COPIED | DLPACK_FLAG_BITMASK_READ_ONLY);

    auto legacy = copy.to_dlpack();  // the legacy format cannot say read-only: refused
    ASSERT_FALSE(legacy);
    EXPECT_EQ(legacy.error().code, holoscan::ErrorCode::kNotSupported);
  }
  EXPECT_EQ(producer.deleter_calls, 1);
}

}  // namespace
