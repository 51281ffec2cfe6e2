// Code written against Holoscan 5.0's exported C++ API (a C++20 API: std::span), compiled as
// C++20 against this library, which is itself built as C++17. The signatures are pinned as 5.0
// exports them (libholoscan_core.so.5, read with nm and objdump); the tests check that 5.0-style
// code behaves as 5.0 declares.
#include <holoscan/core/domain/dlpack.hpp>
#include <holoscan/core/domain/tensor.hpp>
#include <holoscan/core/errors.hpp>
#include <holoscan/core/expected.hpp>
#include <holoscan/dlpack_utils.hpp>
#include <holoscan/memory/memory_storage_type.hpp>
#include <holoscan/memory/tensor_storage.hpp>

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#if __cplusplus < 202002L
#error "this test is the C++20 consumer: compile it as C++20"
#endif

namespace {

using holoscan::DLManagedTensorContext;
using holoscan::Error;
using holoscan::ErrorCode;
using holoscan::Tensor;
template <class T>
using Expected = holoscan::expected<T, Error>;

// --- Tensor members, as 5.0 exports them --------------------------------------------------------

static_assert(std::is_constructible_v<Tensor, const std::shared_ptr<DLManagedTensorContext>&>);
static_assert(std::is_constructible_v<Tensor, std::shared_ptr<DLManagedTensorContext>&&>);
static_assert(std::is_constructible_v<Tensor, DLManagedTensor*>);
static_assert(std::is_constructible_v<Tensor, DLManagedTensorVersioned*>);
static_assert(std::is_copy_constructible_v<Tensor> && std::is_move_constructible_v<Tensor>);
static_assert(std::is_copy_assignable_v<Tensor> && std::is_move_assignable_v<Tensor>);
static_assert(std::has_virtual_destructor_v<Tensor>);
// Layout: a vtable, then the shared context (5.0: the context's shared_ptr at +8).
static_assert(sizeof(Tensor) == sizeof(void*) + sizeof(std::shared_ptr<DLManagedTensorContext>));

static_assert(std::is_same_v<decltype(&Tensor::data), void* (Tensor::*)() const noexcept>);
// mutable_data() is an lvalue-only member: the cast compiles only for that exact overload.
[[maybe_unused]] constexpr auto kMutableData =
    static_cast<Expected<void*> (Tensor::*)()&>(&Tensor::mutable_data);
static_assert(!std::is_invocable_v<decltype(kMutableData), Tensor&&>);
static_assert(std::is_same_v<decltype(&Tensor::shape), std::vector<int64_t> (Tensor::*)() const>);
static_assert(std::is_same_v<decltype(&Tensor::strides), std::vector<int64_t> (Tensor::*)() const>);
static_assert(std::is_same_v<decltype(&Tensor::shape_span),
                             std::span<const int64_t> (Tensor::*)() const noexcept>);
static_assert(std::is_same_v<decltype(&Tensor::dlpack_strides_span),
                             std::span<const int64_t> (Tensor::*)() const noexcept>);
static_assert(std::is_same_v<decltype(&Tensor::size), int64_t (Tensor::*)() const noexcept>);
// 5.0's itemsize() returns a 64-bit unsigned count (its nbytes() reads the whole of %rax after
// the call and compares it unsigned), not 4.x's uint8_t.
static_assert(
    std::is_same_v<decltype(&Tensor::itemsize), std::size_t (Tensor::*)() const noexcept>);
static_assert(std::is_same_v<decltype(&Tensor::nbytes), int64_t (Tensor::*)() const noexcept>);
static_assert(std::is_same_v<decltype(&Tensor::is_contiguous), bool (Tensor::*)() const noexcept>);
static_assert(std::is_same_v<decltype(&Tensor::is_read_only), bool (Tensor::*)() const noexcept>);
static_assert(std::is_same_v<decltype(&Tensor::has_readiness_stream_contract),
                             bool (Tensor::*)() const noexcept>);
static_assert(
    std::is_same_v<decltype(&Tensor::set_readiness_stream), bool (Tensor::*)(cudaStream_t)>);
static_assert(
    std::is_same_v<decltype(&Tensor::set_deallocation_stream), bool (Tensor::*)(cudaStream_t)>);
static_assert(std::is_same_v<decltype(&Tensor::synchronize_for_consumer_stream),
                             Expected<void> (Tensor::*)(cudaStream_t) const>);
static_assert(
    std::is_same_v<decltype(&Tensor::synchronize_for_host), Expected<void> (Tensor::*)() const>);
static_assert(std::is_same_v<decltype(&Tensor::retain_handle), void (Tensor::*)() const noexcept>);
static_assert(std::is_same_v<decltype(&Tensor::release_handle), void (Tensor::*)() const noexcept>);
static_assert(
    std::is_same_v<decltype(&Tensor::to_dlpack), Expected<DLManagedTensor*> (Tensor::*)() const>);
static_assert(std::is_same_v<decltype(&Tensor::to_dlpack_versioned),
                             Expected<DLManagedTensorVersioned*> (Tensor::*)() const>);

static_assert(
    std::is_same_v<decltype(&Tensor::copy), Expected<Tensor> (Tensor::*)(cudaStream_t) const>);
[[maybe_unused]] constexpr auto kCopyTo =
    static_cast<Expected<Tensor> (Tensor::*)(DLDevice, cudaStream_t) const>(&Tensor::copy_to);
static_assert(std::is_same_v<decltype(&Tensor::copy_to_host),
                             Expected<void> (Tensor::*)(void*, std::size_t, cudaStream_t) const>);
static_assert(std::is_same_v<decltype(&Tensor::copy_to_host_async),
                             Expected<void> (Tensor::*)(void*, std::size_t, cudaStream_t) const>);

// --- free functions, as 5.0 exports them --------------------------------------------------------

static_assert(std::is_same_v<decltype(&holoscan::make_tensor_from_dlpack),
                             Expected<Tensor> (*)(DLManagedTensor*)>);
static_assert(std::is_same_v<decltype(&holoscan::make_tensor_from_dlpack_versioned),
                             Expected<Tensor> (*)(DLManagedTensorVersioned*)>);
static_assert(std::is_same_v<decltype(&holoscan::calc_strides),
                             void (*)(const DLTensor&, std::vector<int64_t>&, bool)>);
[[maybe_unused]] constexpr auto kCopyDLTensor =
    static_cast<void (*)(const DLTensor&, DLTensor&, std::vector<int64_t>&, std::vector<int64_t>&,
                         holoscan::DLPackMetadataCopyOptions)>(
        &holoscan::copy_dl_tensor_with_owned_metadata);
[[maybe_unused]] constexpr auto kCopyIntoContextVersioned = static_cast<void (*)(
    DLManagedTensorContext&, const DLManagedTensorVersioned&, holoscan::DLPackMetadataCopyOptions)>(
    &holoscan::copy_dl_tensor_with_owned_metadata);
[[maybe_unused]] constexpr auto kCopyIntoContext = static_cast<void (*)(
    DLManagedTensorContext&, const DLTensor&, holoscan::DLPackMetadataCopyOptions)>(
    &holoscan::copy_dl_tensor_with_owned_metadata);
static_assert(
    std::is_same_v<decltype(&holoscan::dldevice_from_pointer), Expected<DLDevice> (*)(void*)>);
static_assert(std::is_same_v<decltype(&holoscan::dldatatype_from_typestr),
                             Expected<DLDataType> (*)(std::string_view)>);
static_assert(
    std::is_same_v<decltype(&holoscan::numpy_dtype), Expected<const char*> (*)(DLDataType)>);
static_assert(std::is_same_v<decltype(&holoscan::synchronize_cuda_streams),
                             Expected<void> (*)(cudaStream_t, cudaStream_t)>);
static_assert(std::is_same_v<decltype(&holoscan::synchronize_cuda_stream_for_host),
                             Expected<void> (*)(cudaStream_t)>);
static_assert(
    std::is_same_v<decltype(&holoscan::error_code_name), std::string_view (*)(ErrorCode) noexcept>);
static_assert(std::is_constructible_v<holoscan::RuntimeError, const Error&>);
static_assert(std::is_constructible_v<holoscan::RuntimeError, ErrorCode>);
static_assert(std::is_constructible_v<holoscan::RuntimeError, ErrorCode, const char*>);
static_assert(std::is_constructible_v<holoscan::RuntimeError, ErrorCode, const std::string&>);
static_assert(std::is_constructible_v<holoscan::RuntimeError, ErrorCode, std::string_view>);

// make_tensor's non-allocating overloads, MemoryStorageType numbered as 5.0 maps it.
[[maybe_unused]] constexpr auto kMakeTensorOnDevice = static_cast<Expected<Tensor> (*)(
    std::span<const int64_t>, DLDataType, holoscan::TensorByteStridesView,
    holoscan::MemoryStorageType, void*, std::shared_ptr<holoscan::TensorMemoryReference>, int)>(
    &holoscan::make_tensor);
[[maybe_unused]] constexpr auto kMakeTensor = static_cast<Expected<Tensor> (*)(
    std::span<const int64_t>, DLDataType, holoscan::TensorByteStridesView,
    holoscan::MemoryStorageType, void*, std::shared_ptr<holoscan::TensorMemoryReference>)>(
    &holoscan::make_tensor);
[[maybe_unused]] constexpr auto kMakeTensorReleased = static_cast<Expected<Tensor> (*)(
    std::span<const int64_t>, DLDataType, holoscan::TensorByteStridesView,
    holoscan::MemoryStorageType, void*, std::function<Expected<void>(void*)>)>(
    &holoscan::make_tensor);
// wrap_memory: the one form 5.0 exports, the device always given.
[[maybe_unused]] constexpr auto kWrapMemory = static_cast<Expected<void> (*)(
    Tensor&, std::span<const int64_t>, DLDataType, holoscan::TensorByteStridesView,
    holoscan::MemoryStorageType, void*, std::function<Expected<void>(void*)>, int)>(
    &holoscan::wrap_memory);
static_assert(static_cast<int>(holoscan::MemoryStorageType::kHost) == 0);
static_assert(static_cast<int>(holoscan::MemoryStorageType::kDevice) == 1);
static_assert(static_cast<int>(holoscan::MemoryStorageType::kSystem) == 2);
static_assert(static_cast<int>(holoscan::MemoryStorageType::kCudaManaged) == 3);
static_assert(std::is_convertible_v<std::nullopt_t, holoscan::TensorByteStridesView>);
static_assert(std::is_convertible_v<std::span<const int64_t>, holoscan::TensorByteStridesView>);
static_assert(std::is_convertible_v<std::optional<std::span<const int64_t>>,
                                    holoscan::TensorByteStridesView>);

// --- 5.0-style user code ------------------------------------------------------------------------

// Whether `result` is a refusal with `code` (any code: nullopt) whose message holds `text`.
template <class T>
testing::AssertionResult is_refusal(const Expected<T>& result, std::optional<ErrorCode> code,
                                    std::string_view text = {}) {
  if (result) {
    return testing::AssertionFailure() << "accepted";
  }
  const Error& error = result.error();
  if (code && error.code != *code) {
    return testing::AssertionFailure() << holoscan::error_code_name(error.code) << ", not "
                                       << holoscan::error_code_name(*code) << ": " << error.message;
  }
  if (error.message.find(text) == std::string::npos) {
    return testing::AssertionFailure() << "no \"" << text << "\" in \"" << error.message << "\"";
  }
  return testing::AssertionSuccess();
}

// An operator's host buffer behind a context built by hand (writable authority).
class HostBuffer final : public holoscan::TensorMemoryReference {
 public:
  explicit HostBuffer(std::size_t count) : values_(count) {}
  float* data() { return values_.data(); }

 private:
  std::vector<float> values_;
};

Tensor make_host_tensor(std::vector<int64_t> shape) {
  const int64_t count = std::accumulate(shape.begin(), shape.end(), int64_t{1},
                                        [](int64_t a, int64_t b) { return a * b; });
  auto buffer = std::make_shared<HostBuffer>(static_cast<std::size_t>(count));
  auto context = std::make_shared<DLManagedTensorContext>();
  context->memory_reference = buffer;
  const DLTensor view{buffer->data(),
                      {kDLCPU, 0},
                      static_cast<int32_t>(shape.size()),
                      {kDLFloat, 32, 1},
                      shape.data(),
                      nullptr,
                      0};
  holoscan::copy_dl_tensor_with_owned_metadata(*context, view, {true});
  return Tensor(context);  // a const-correct lvalue: shared, not moved
}

// A context written by hand over `buffer`: float32 on the host, nothing else set.
std::shared_ptr<DLManagedTensorContext> hand_written_context(std::shared_ptr<HostBuffer> buffer) {
  auto context = std::make_shared<DLManagedTensorContext>();
  context->tensor.dl_tensor.data = buffer->data();
  context->tensor.dl_tensor.device = {kDLCPU, 0};
  context->tensor.dl_tensor.dtype = {kDLFloat, 32, 1};
  context->memory_reference = std::move(buffer);
  return context;
}

// Writes through mutable_data(), forwarding its error, as 5.0 operators do.
Expected<void> fill_iota(Tensor& tensor) {
  auto data = tensor.mutable_data();
  if (!data) {
    return holoscan::forward_error(data);
  }
  auto* values = static_cast<float*>(*data);
  for (int64_t i = 0; i < tensor.size(); ++i) {
    values[i] = static_cast<float>(i);
  }
  return {};
}

int64_t product_of_extents(const Tensor& tensor) {
  int64_t product = 1;
  for (const int64_t extent : tensor.shape_span()) {
    product *= extent;
  }
  return product;
}

// DLManagedTensorContext as 5.0 lays it out: the view at +0, the owner at +0x50, dl_shape at
// +0x60, dl_strides at +0x78 (measured on an object: the type is not standard-layout).
TEST(Holoscan50Api, ContextLayout) {
  const DLManagedTensorContext context;
  const auto offset = [&](const void* member) {
    return static_cast<const char*>(member) - reinterpret_cast<const char*>(&context);
  };
  EXPECT_EQ(offset(&context.tensor), 0);
  EXPECT_EQ(offset(&context.memory_reference), 0x50);
  EXPECT_EQ(offset(&context.dl_shape), 0x60);
  EXPECT_EQ(offset(&context.dl_strides), 0x78);
}

// 5.0's constructor writes the DLPack version it was built with (1.3, read at
// DLManagedTensorContext::DLManagedTensorContext()); ours writes this build's, the same here.
TEST(Holoscan50Api, ANewContextCarriesTheBuildsDLPackVersion) {
  const DLManagedTensorContext context;
  EXPECT_EQ(context.tensor.version.major, static_cast<uint32_t>(DLPACK_MAJOR_VERSION));
  EXPECT_EQ(context.tensor.version.minor, static_cast<uint32_t>(DLPACK_MINOR_VERSION));
  EXPECT_EQ(context.tensor.flags, 0u);
}

TEST(Holoscan50Api, SpansViewTheContextWithoutCopies) {
  const Tensor tensor = make_host_tensor({2, 3, 4});
  EXPECT_EQ(product_of_extents(tensor), 24);
  EXPECT_EQ(tensor.shape_span().data(), tensor.dl_ctx()->tensor.dl_tensor.shape);
  const std::span<const int64_t> strides = tensor.dlpack_strides_span();
  ASSERT_EQ(strides.size(), 3u);
  EXPECT_EQ(strides[0], 12);  // elements, not bytes
  EXPECT_EQ(tensor.strides()[0], 48);
  const Tensor empty;
  EXPECT_TRUE(empty.shape_span().empty());
  EXPECT_TRUE(empty.dlpack_strides_span().empty());
}

TEST(Holoscan50Api, MutableDataWritesAndRefusesReadOnlyAuthority) {
  Tensor tensor = make_host_tensor({4});
  ASSERT_TRUE(fill_iota(tensor).has_value());
  EXPECT_EQ(tensor.data_as<float>()[3], 3.0f);

  auto exported = tensor.to_dlpack_versioned();
  ASSERT_TRUE(exported) << exported.error().message;
  EXPECT_EQ((*exported)->flags & DLPACK_FLAG_BITMASK_READ_ONLY, 0u);
  auto imported = holoscan::make_tensor_from_dlpack_versioned(*exported);
  ASSERT_TRUE(imported) << imported.error().message;
  EXPECT_TRUE(imported->is_read_only());
  auto refused = fill_iota(*imported);
  EXPECT_TRUE(is_refusal(refused, ErrorCode::kPermissionDenied));
}

// Where 5.0 refuses, ours says 5.0's sentence (docs/holoscan-5.0.md, "Messages"): the three
// refusals of mutable_data, as libholoscan_core.so.5 words them.
TEST(Holoscan50Api, MutableDataRefusalsSay50sMessages) {
  Tensor empty;
  auto refused = empty.mutable_data();
  EXPECT_TRUE(is_refusal(refused, ErrorCode::kInvalidArgument, "Tensor context is empty"));

  auto context = std::make_shared<DLManagedTensorContext>();
  context->memory_reference = std::make_shared<HostBuffer>(0);
  std::array<int64_t, 1> shape{0};
  const DLTensor view{nullptr, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, shape.data(), nullptr, 0};
  holoscan::copy_dl_tensor_with_owned_metadata(*context, view, {true});
  Tensor no_data(context);
  refused = no_data.mutable_data();
  EXPECT_TRUE(is_refusal(refused, ErrorCode::kInvalidArgument, "Tensor data pointer is null"));

  Tensor writable = make_host_tensor({2});
  auto exported = writable.to_dlpack_versioned();
  ASSERT_TRUE(exported) << exported.error().message;
  auto imported = holoscan::make_tensor_from_dlpack_versioned(*exported);
  ASSERT_TRUE(imported) << imported.error().message;
  refused = imported->mutable_data();
  EXPECT_TRUE(is_refusal(refused, ErrorCode::kPermissionDenied, "Tensor data is read-only"));
}

// 5.0's exclusive access claim (its to_dlpack*, mutable_data and export deleter, read from
// libholoscan_core.so.5): while a writable Tensor's export is alive, the codes and sentences 5.0
// gives; its deleter ends the claim.
TEST(Holoscan50Api, AWritableTensorHasOneMutableExportAtATime) {
  Tensor writable = make_host_tensor({2});
  auto exported = writable.to_dlpack_versioned();
  ASSERT_TRUE(exported) << exported.error().message;
  EXPECT_TRUE(is_refusal(writable.to_dlpack_versioned(), ErrorCode::kPermissionDenied,
                         "Tensor has an active mutable DLPack export"));
  EXPECT_TRUE(is_refusal(writable.to_dlpack(), ErrorCode::kNotSupported,
                         "Legacy DLPack cannot represent read-only Tensor authority or an active "
                         "read lease"));
  EXPECT_TRUE(is_refusal(writable.mutable_data(), ErrorCode::kPermissionDenied,
                         "Tensor data has an active access claim"));
  (*exported)->deleter(*exported);
  auto data = writable.mutable_data();
  EXPECT_TRUE(data) << data.error().message;
  auto legacy = writable.to_dlpack();
  ASSERT_TRUE(legacy) << legacy.error().message;
  EXPECT_TRUE(is_refusal(writable.to_dlpack_versioned(), ErrorCode::kPermissionDenied,
                         "Tensor has an active mutable DLPack export"));
  (*legacy)->deleter(*legacy);
}

// 5.0 refuses to export an empty Tensor with "Tensor has no data to export", both forms.
TEST(Holoscan50Api, ExportOfAnEmptyTensorSays50sMessage) {
  const Tensor empty;
  auto versioned = empty.to_dlpack_versioned();
  EXPECT_TRUE(is_refusal(versioned, ErrorCode::kInvalidArgument, "Tensor has no data to export"));
  auto legacy = empty.to_dlpack();
  EXPECT_TRUE(is_refusal(legacy, ErrorCode::kInvalidArgument, "Tensor has no data to export"));
}

// 5.0's copy_to_host of an empty Tensor: "Tensor copy source is null" (copy and copy_to say
// "empty").
TEST(Holoscan50Api, HostCopyOfAnEmptyTensorSays50sMessage) {
  const Tensor empty;
  float destination = 0.0f;
  auto refused = empty.copy_to_host(&destination, sizeof(destination), nullptr);
  EXPECT_TRUE(is_refusal(refused, ErrorCode::kInvalidArgument, "Tensor copy source is null"));
  refused = empty.copy_to_host_async(&destination, sizeof(destination), nullptr);
  EXPECT_TRUE(is_refusal(refused, std::nullopt, "Tensor copy source is null"));
  auto copy = empty.copy(nullptr);
  EXPECT_TRUE(is_refusal(copy, std::nullopt, "Tensor copy source is empty"));
}

// 5.0's size() of a view that describes no extents (a context written by hand: a negative ndim,
// or no shape for ndim > 0) is 0, and so is nbytes(); data() whose byte_offset would wrap the
// address space is null.
TEST(Holoscan50Api, AViewWithoutExtentsHasNoElements) {
  auto buffer = std::make_shared<HostBuffer>(4);
  auto context = hand_written_context(buffer);
  context->tensor.dl_tensor.ndim = 2;
  context->tensor.dl_tensor.shape = nullptr;
  const Tensor shapeless(context);
  EXPECT_EQ(shapeless.size(), 0);
  EXPECT_EQ(shapeless.nbytes(), 0);
  EXPECT_TRUE(shapeless.shape().empty());

  context->tensor.dl_tensor.ndim = -1;
  EXPECT_EQ(shapeless.size(), 0);
  EXPECT_EQ(shapeless.nbytes(), 0);

  context->tensor.dl_tensor.ndim = 0;  // a scalar: one element
  EXPECT_EQ(shapeless.size(), 1);
  EXPECT_EQ(shapeless.nbytes(), 4);
}

TEST(Holoscan50Api, DataWhoseOffsetWrapsIsNull) {
  auto buffer = std::make_shared<HostBuffer>(4);
  auto context = hand_written_context(buffer);
  context->tensor.dl_tensor.byte_offset = 4;
  const Tensor tensor(context);
  EXPECT_EQ(tensor.data(), static_cast<void*>(buffer->data() + 1));
  context->tensor.dl_tensor.byte_offset = ~uint64_t{0} - 2;  // past the end of the address space
  EXPECT_EQ(tensor.data(), nullptr);
}

// 5.0's copy_to_host checks the destination first: a null one is "Tensor copy destination is
// null" whatever the source.
TEST(Holoscan50Api, HostCopyNamesANullDestinationFirst) {
  const Tensor empty;
  auto refused = empty.copy_to_host(nullptr, 0, nullptr);
  EXPECT_TRUE(is_refusal(refused, ErrorCode::kInvalidArgument, "Tensor copy destination is null"));
  refused = empty.copy_to_host_async(nullptr, 0, nullptr);
  EXPECT_TRUE(is_refusal(refused, std::nullopt, "Tensor copy destination is null"));
}

// A memory reference without a readiness contract: 5.0's kNotImplemented and its sentence.
TEST(Holoscan50Api, NoReadinessContractSays50sMessage) {
  const Tensor tensor = make_host_tensor({2});
  auto refused = tensor.synchronize_for_consumer_stream(nullptr);
  EXPECT_TRUE(
      is_refusal(refused, ErrorCode::kNotImplemented,
                 "Tensor memory reference does not provide a producer-readiness stream contract"));
}

// A newer DLPack major: 5.0's kInvalidArgument, "Unsupported DLPack major version 2 (this build
// supports up to 1)"; ownership stays with the caller.
TEST(Holoscan50Api, ANewerDLPackMajorSays50sMessage) {
  float value = 0.0f;
  int64_t extent = 1;
  DLManagedTensorVersioned managed{};
  managed.version = {DLPACK_MAJOR_VERSION + 1, 0};
  managed.dl_tensor = DLTensor{&value, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, &extent, nullptr, 0};
  auto refused = holoscan::make_tensor_from_dlpack_versioned(&managed);
  const std::string expected =
      "Unsupported DLPack major version " + std::to_string(DLPACK_MAJOR_VERSION + 1) +
      " (this build supports up to " + std::to_string(DLPACK_MAJOR_VERSION) + ")";
  EXPECT_TRUE(is_refusal(refused, ErrorCode::kInvalidArgument, expected));
}

// 5.0's constructor locks the authority of a context flagged READ_ONLY: clearing the flag later
// does not give write access back.
TEST(Holoscan50Api, AReadOnlyFlagLocksTheContextAtConstruction) {
  const Tensor source = make_host_tensor({4});
  auto context = std::make_shared<DLManagedTensorContext>(*source.dl_ctx());
  context->tensor.flags |= DLPACK_FLAG_BITMASK_READ_ONLY;
  Tensor tensor(context);
  context->tensor.flags &= ~DLPACK_FLAG_BITMASK_READ_ONLY;
  EXPECT_TRUE(tensor.is_read_only());
  auto refused = fill_iota(tensor);
  EXPECT_TRUE(is_refusal(refused, ErrorCode::kPermissionDenied));
  EXPECT_FALSE(source.is_read_only());  // another context, its own authority
}

TEST(Holoscan50Api, ExportsNeverThrow) {
  const Tensor empty;
  auto versioned = empty.to_dlpack_versioned();
  EXPECT_TRUE(is_refusal(versioned, ErrorCode::kInvalidArgument));

  Tensor writable = make_host_tensor({2, 2});
  auto legacy = writable.to_dlpack();
  ASSERT_TRUE(legacy) << legacy.error().message;
  auto imported = holoscan::make_tensor_from_dlpack(*legacy);
  ASSERT_TRUE(imported) << imported.error().message;
  auto refused = imported->to_dlpack();  // read-only authority has no legacy form
  EXPECT_TRUE(is_refusal(refused, ErrorCode::kNotSupported,
                         "Legacy DLPack cannot represent read-only Tensor"));
}

TEST(Holoscan50Api, MakeTensorWrapsAnOperatorsBuffer) {
  auto buffer = std::make_shared<HostBuffer>(6);
  const std::array<int64_t, 2> shape{2, 3};
  auto tensor = holoscan::make_tensor(shape, DLDataType{kDLFloat, 32, 1}, std::nullopt,
                                      holoscan::MemoryStorageType::kSystem, buffer->data(), buffer);
  ASSERT_TRUE(tensor) << tensor.error().message;
  EXPECT_FALSE(tensor->is_read_only());
  EXPECT_EQ(tensor->device().device_type, kDLCPU);
  ASSERT_TRUE(fill_iota(*tensor).has_value());
  EXPECT_EQ(buffer->data()[5], 5.0f);

  const std::array<int64_t, 2> transposed{3, 2};
  const std::array<int64_t, 2> byte_strides{4, 12};
  auto view =
      holoscan::make_tensor(std::span<const int64_t>(transposed), DLDataType{kDLFloat, 32, 1},
                            std::optional<std::span<const int64_t>>(byte_strides),
                            holoscan::MemoryStorageType::kSystem, buffer->data(), buffer, 0);
  ASSERT_TRUE(view) << view.error().message;
  EXPECT_EQ(view->dlpack_strides_span()[1], 3);

  auto refused = holoscan::make_tensor(
      shape, DLDataType{kDLFloat, 32, 1}, std::span<const int64_t>(byte_strides.data(), 1),
      holoscan::MemoryStorageType::kSystem, buffer->data(), buffer);
  EXPECT_TRUE(is_refusal(refused, ErrorCode::kInvalidArgument));

  int released = 0;
  {
    auto owned = holoscan::make_tensor(shape, DLDataType{kDLFloat, 32, 1}, std::nullopt,
                                       holoscan::MemoryStorageType::kSystem, buffer->data(),
                                       [&released](void*) -> Expected<void> {
                                         ++released;
                                         return {};
                                       });
    ASSERT_TRUE(owned) << owned.error().message;
  }
  EXPECT_EQ(released, 1);
}

// 5.0 declares make_tensor and wrap_memory with span shapes only, so a braced shape ({} for a 0-d
// tensor, {2, 3}) or an initializer_list compiles there; beside our vector forms it was ambiguous.
TEST(Holoscan50Api, MakeTensorAndWrapMemoryTakeABracedShape) {
  auto buffer = std::make_shared<HostBuffer>(6);
  const DLDataType f32{kDLFloat, 32, 1};
  auto scalar = holoscan::make_tensor({}, f32, std::nullopt, holoscan::MemoryStorageType::kSystem,
                                      buffer->data(), buffer);
  ASSERT_TRUE(scalar) << scalar.error().message;
  EXPECT_EQ(scalar->ndim(), 0);
  EXPECT_EQ(scalar->size(), 1);
  auto matrix = holoscan::make_tensor(
      {2, 3}, f32, std::nullopt, holoscan::MemoryStorageType::kSystem, buffer->data(), buffer, 0);
  ASSERT_TRUE(matrix) << matrix.error().message;
  EXPECT_EQ(matrix->shape(), (std::vector<int64_t>{2, 3}));
  const std::initializer_list<int64_t> shape{3, 2};
  auto listed =
      holoscan::make_tensor(shape, f32, std::nullopt, holoscan::MemoryStorageType::kSystem,
                            buffer->data(), [](void*) -> Expected<void> { return {}; });
  ASSERT_TRUE(listed) << listed.error().message;
  EXPECT_EQ(listed->shape(), (std::vector<int64_t>{3, 2}));
  Tensor repointed;
  ASSERT_TRUE(holoscan::wrap_memory(repointed, {}, f32, std::nullopt,
                                    holoscan::MemoryStorageType::kSystem, buffer->data(), nullptr,
                                    0));
  EXPECT_EQ(repointed.ndim(), 0);
}

// 5.0's inline make_error: a caught RuntimeError back into an Error, its code's name stripped.
TEST(Holoscan50Api, MakeErrorTurnsARuntimeErrorBackIntoAnError) {
  const holoscan::Error error =
      holoscan::make_error(holoscan::RuntimeError(ErrorCode::kInvalidArgument, "shape[0] is -1"));
  EXPECT_EQ(error.code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(error.message, "shape[0] is -1");
  EXPECT_EQ(error.provenance, 0u);
  EXPECT_EQ(holoscan::make_error(holoscan::RuntimeError(ErrorCode::kClosed)).message, "");
  EXPECT_EQ(holoscan::make_error(holoscan::RuntimeError("plain text")).message, "plain text");
  EXPECT_EQ(holoscan::make_error(holoscan::RuntimeError("plain text")).code, ErrorCode::kFailure);
  const auto recovered = [&]() -> Expected<int> {
    try {
      throw holoscan::RuntimeError(ErrorCode::kNotFound, "no device");
    } catch (const holoscan::RuntimeError& e) {
      return holoscan::make_unexpected(holoscan::make_error(e));
    }
  }();
  ASSERT_FALSE(recovered);
  EXPECT_EQ(recovered.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(recovered.error().message, "no device");
}

// An operator re-pointing its output Tensor at memory it allocated, 5.0-style.
TEST(Holoscan50Api, WrapMemoryRepointsATensor) {
  auto* values = new float[6]{};
  int released = 0;
  Tensor tensor = make_host_tensor({1});
  const std::array<int64_t, 2> shape{2, 3};
  auto wrapped = holoscan::wrap_memory(
      tensor, shape, DLDataType{kDLFloat, 32, 1}, std::nullopt,
      holoscan::MemoryStorageType::kSystem, values,
      [&released](void* data) -> Expected<void> {
        delete[] static_cast<float*>(data);
        ++released;
        return {};
      },
      -1);
  ASSERT_TRUE(wrapped) << wrapped.error().message;
  EXPECT_EQ(tensor.data(), values);
  EXPECT_EQ(product_of_extents(tensor), 6);
  ASSERT_TRUE(fill_iota(tensor).has_value());
  EXPECT_EQ(values[5], 5.0f);

  float other = 0.0f;
  auto refused =
      holoscan::wrap_memory(tensor, std::span<const int64_t>(shape), DLDataType{kDLFloat, 32, 1},
                            std::nullopt, holoscan::MemoryStorageType::kSystem, nullptr, {}, -1);
  ASSERT_TRUE(is_refusal(refused, ErrorCode::kInvalidArgument));
  EXPECT_EQ(refused.error().message, "wrap_memory pointer is null");
  EXPECT_EQ(tensor.data(), values);  // untouched
  EXPECT_EQ(released, 0);
  // The device left out, as 5.0's declaration allows (Allocator::kUnknownDeviceId, -1).
  ASSERT_TRUE(holoscan::wrap_memory(tensor, std::span<const int64_t>(shape.data(), 1),
                                    DLDataType{kDLFloat, 32, 1}, std::nullopt,
                                    holoscan::MemoryStorageType::kSystem, &other, {}));
  EXPECT_EQ(released, 1);  // the last owner of the first memory went
}

TEST(Holoscan50Api, HostCopiesAreOwningAndWritable) {
  Tensor tensor = make_host_tensor({2, 3});
  ASSERT_TRUE(fill_iota(tensor).has_value());
  auto copy = tensor.copy(nullptr);
  ASSERT_TRUE(copy) << copy.error().message;
  EXPECT_NE(copy->data(), tensor.data());
  EXPECT_NE(copy->dl_ctx()->tensor.flags & DLPACK_FLAG_BITMASK_IS_COPIED, 0u);
  ASSERT_TRUE(fill_iota(*copy).has_value());
  std::array<float, 6> out{};
  ASSERT_TRUE(tensor.copy_to_host(out.data(), sizeof(out), nullptr).has_value());
  EXPECT_EQ(out[5], 5.0f);
  auto small = tensor.copy_to_host(out.data(), sizeof(out) - 1, nullptr);
  EXPECT_TRUE(is_refusal(small, ErrorCode::kInvalidArgument));
}

// 5.0 imports any element size: bits (8 bits wide) times lanes (16) can exceed 255 bytes, and
// itemsize() reports it.
TEST(Holoscan50Api, WideVectorElementsImport) {
  std::vector<uint8_t> bytes(2 * 512);
  int64_t shape[] = {2};
  static int deleted = 0;
  DLManagedTensorVersioned managed{};
  managed.version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
  managed.deleter = [](DLManagedTensorVersioned*) { ++deleted; };
  managed.dl_tensor.data = bytes.data();
  managed.dl_tensor.device = {kDLCPU, 0};
  managed.dl_tensor.ndim = 1;
  managed.dl_tensor.dtype = {kDLFloat, 64, 64};  // 64 lanes of float64: 512 bytes an element
  managed.dl_tensor.shape = shape;
  {
    auto tensor = holoscan::make_tensor_from_dlpack_versioned(&managed);
    ASSERT_TRUE(tensor) << tensor.error().message;
    const std::size_t itemsize = tensor->itemsize();
    EXPECT_EQ(itemsize, 512u);
    EXPECT_EQ(tensor->nbytes(), 1024);
    EXPECT_EQ(tensor->strides(), std::vector<int64_t>{512});
  }
  EXPECT_EQ(deleted, 1);
}

TEST(Holoscan50Api, HandleClaimsArePairedByTheCaller) {
  const Tensor tensor = make_host_tensor({1});
  tensor.retain_handle();
  const Tensor copy = tensor;  // NOLINT(performance-unnecessary-copy-initialization)
  tensor.release_handle();
  EXPECT_EQ(copy.dl_ctx(), tensor.dl_ctx());
}

// 5.0's numpy_dtype reads the code and bits only: a vector dtype gives its lane's type string.
TEST(Holoscan50Api, NumpyDtypeIgnoresLanes) {
  auto typestr = holoscan::numpy_dtype(DLDataType{kDLFloat, 32, 4});
  ASSERT_TRUE(typestr) << typestr.error().message;
  EXPECT_STREQ(*typestr, "<f4");
  auto refused = holoscan::numpy_dtype(DLDataType{kDLFloat, 8, 1});
  EXPECT_TRUE(
      is_refusal(refused, ErrorCode::kInvalidArgument,
                 "Failed to determine type string from DLDataType: unsupported (code=2, bits=8)"));
}

TEST(Holoscan50Api, ErrorCodeNames) {
  EXPECT_EQ(holoscan::error_code_name(ErrorCode::kNotSupported), "kNotSupported");
  EXPECT_EQ(holoscan::error_code_name(static_cast<ErrorCode>(4242)), "unknown");
  const holoscan::RuntimeError error(ErrorCode::kPermissionDenied, std::string_view("no"));
  EXPECT_EQ(error.code(), ErrorCode::kPermissionDenied);
}

}  // namespace
