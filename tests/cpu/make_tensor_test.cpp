// Covers make_tensor over memory someone else owns: storage types and devices, byte strides, the
// import's layout rules with Holoscan 5.0's messages, writer authority, and the owner's lifetime
// (a memory reference, or a release function that runs once, after every point, never on a
// rejection, its failures reported).
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda/cuda_api.hpp"
#include "holoscan/deferred_release.hpp"
#include "holoscan/make_tensor.hpp"
#include "holoscan/stream_tracked_reference.hpp"
#include "holoscan/tensor.hpp"
#include "support/fake_cuda_test.hpp"
#include "support/gtest_printers.hpp"

namespace holoscan {
namespace {

constexpr DLDataType kFloat32{kDLFloat, 32, 1};

// Host memory and the reference that owns it, as an operator would hand them over.
class HostMemory final : public TensorMemoryReference {
 public:
  explicit HostMemory(std::size_t count) : values_(count) {}
  float* data() { return values_.data(); }

 private:
  std::vector<float> values_;
};

// Checks a rejection: the code, Holoscan 5.0's text in the message, and that nothing kept the
// owner.
void expect_rejected(const expected<Tensor, Error>& result, const std::string& text,
                     const std::shared_ptr<HostMemory>& owner) {
  ASSERT_FALSE(result.has_value());
  EXPECT_EQ(result.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(result.error().message.find(text), std::string::npos) << result.error().message;
  EXPECT_EQ(owner.use_count(), 1);
}

TEST(MakeTensor, SystemMemoryIsACompactWritableHostTensor) {
  auto owner = std::make_shared<HostMemory>(6);
  auto tensor =
      make_tensor({2, 3}, kFloat32, std::nullopt, MemoryStorageType::kSystem, owner->data(), owner);
  ASSERT_TRUE(tensor.has_value()) << tensor.error().message;
  EXPECT_EQ(tensor->device().device_type, kDLCPU);
  EXPECT_EQ(tensor->data(), owner->data());
  EXPECT_EQ(tensor->shape(), (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(tensor->strides(), (std::vector<std::int64_t>{12, 4}));
  EXPECT_TRUE(tensor->is_contiguous());
  EXPECT_FALSE(tensor->is_read_only());
  EXPECT_EQ(tensor->flags(), 0u);
  EXPECT_EQ(tensor->version().major, HOLOSCAN_DLPACK_IMPL_VERSION_MAJOR);
  EXPECT_EQ(tensor->memory_reference(), owner);
  auto data = tensor->mutable_data();
  ASSERT_TRUE(data.has_value()) << data.error().message;
  static_cast<float*>(*data)[5] = 2.5f;
  EXPECT_EQ(owner->data()[5], 2.5f);
  auto legacy = tensor->to_dlpack();  // writer authority has a legacy form
  ASSERT_TRUE(legacy.has_value()) << legacy.error().message;
  (*legacy)->deleter(*legacy);
}

TEST(MakeTensor, ByteStridesBecomeElementStrides) {
  auto owner = std::make_shared<HostMemory>(6);
  const std::vector<std::int64_t> byte_strides{4, 12};  // the transpose of a 2x3 row-major
  auto tensor =
      make_tensor({3, 2}, kFloat32, byte_strides, MemoryStorageType::kSystem, owner->data(), owner);
  ASSERT_TRUE(tensor.has_value()) << tensor.error().message;
  EXPECT_EQ(tensor->strides(), byte_strides);
  EXPECT_EQ(tensor->dl_tensor().strides[0], 1);
  EXPECT_EQ(tensor->dl_tensor().strides[1], 3);
  EXPECT_FALSE(tensor->is_contiguous());
  const std::array<std::int64_t, 2> compact{8, 4};
  auto from_array =
      make_tensor({3, 2}, kFloat32, compact, MemoryStorageType::kSystem, owner->data(), owner);
  ASSERT_TRUE(from_array.has_value()) << from_array.error().message;
  EXPECT_TRUE(from_array->is_contiguous());
}

TEST(MakeTensor, StorageTypesGiveHoloscansDevices) {
  auto owner = std::make_shared<HostMemory>(1);
  const auto device_of = [&](MemoryStorageType type, int device) {
    auto tensor = make_tensor({1}, kFloat32, {}, type, owner->data(), owner, device);
    EXPECT_TRUE(tensor.has_value()) << tensor.error().message;
    return tensor.has_value() ? tensor->device() : DLDevice{};
  };
  EXPECT_EQ(device_of(MemoryStorageType::kSystem, 3).device_type, kDLCPU);
  EXPECT_EQ(device_of(MemoryStorageType::kHost, -1).device_type, kDLCUDAHost);
  EXPECT_EQ(device_of(MemoryStorageType::kCudaManaged, -1).device_type, kDLCUDAManaged);
  const DLDevice device = device_of(MemoryStorageType::kDevice, 1);
  EXPECT_EQ(device.device_type, kDLCUDA);
  EXPECT_EQ(device.device_id, 1);
  expect_rejected(
      make_tensor({1}, kFloat32, {}, static_cast<MemoryStorageType>(7), owner->data(), owner),
      "Unsupported tensor memory storage type", owner);
}

class MakeTensorOnFakeDevices : public test::FakeCudaTest {
 protected:
  MakeTensorOnFakeDevices() : FakeCudaTest(2) {}
};

TEST_F(MakeTensorOnFakeDevices, DeviceMemoryTakesThePointersDevice) {
  ASSERT_EQ(detail::cuda().set_device(1), cudaSuccess);
  void* memory = nullptr;
  ASSERT_EQ(detail::cuda().malloc(&memory, 64), cudaSuccess);
  ASSERT_EQ(fake().current_device(), 1);
  auto owner = std::make_shared<HostMemory>(1);  // stands for the owner of `memory`
  auto tensor = make_tensor({16}, kFloat32, {}, MemoryStorageType::kDevice, memory, owner);
  ASSERT_TRUE(tensor.has_value()) << tensor.error().message;
  EXPECT_EQ(tensor->device().device_type, kDLCUDA);
  EXPECT_EQ(tensor->device().device_id, 1);
  *tensor = Tensor();
  // Host memory is not device memory: refused with Holoscan 5.0's message.
  expect_rejected(make_tensor({1}, kFloat32, {}, MemoryStorageType::kDevice, owner->data(), owner),
                  "Tensor storage type does not match the CUDA pointer memory type", owner);
  ASSERT_EQ(detail::cuda().free(memory), cudaSuccess);
  ASSERT_EQ(detail::cuda().set_device(0), cudaSuccess);
}

// A failed pointer query: kFailure with the cudaError_t, and Holoscan 5.0's sentence ("Failed to
// determine DLDevice based on pointer: ...") before the call and CUDA's error name.
TEST_F(MakeTensorOnFakeDevices, AFailedPointerQuerySays50sMessage) {
  float value = 0.0f;
  fake().fail_next(test::CudaEntry::kPointerGetAttributes, cudaErrorInvalidValue);
  auto refused = dldevice_from_pointer(&value);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, ErrorCode::kFailure);
  EXPECT_EQ(refused.error().provenance, static_cast<std::uint64_t>(cudaErrorInvalidValue));
  EXPECT_NE(refused.error().message.find("Failed to determine DLDevice based on pointer"),
            std::string::npos)
      << refused.error().message;
  EXPECT_NE(refused.error().message.find("cudaPointerGetAttributes"), std::string::npos);
  EXPECT_NE(refused.error().message.find("cudaErrorInvalidValue"), std::string::npos);
}

TEST(MakeTensor, RefusalsNameTheProblemAndKeepNothing) {
  auto owner = std::make_shared<HostMemory>(8);
  float* data = owner->data();
  const auto system = MemoryStorageType::kSystem;
  expect_rejected(make_tensor({2}, kFloat32, {}, system, nullptr, owner),
                  "make_tensor pointer is null", owner);
  EXPECT_EQ(
      make_tensor({2}, kFloat32, {}, system, data, std::shared_ptr<HostMemory>()).error().message,
      "make_tensor memory reference is null");
  expect_rejected(
      make_tensor({2, 2}, kFloat32, std::vector<std::int64_t>{-8, 4}, system, data, owner),
      "Tensor byte strides must be non-negative", owner);
  expect_rejected(
      make_tensor({2, 2}, kFloat32, std::vector<std::int64_t>{8, 6}, system, data, owner),
      "Tensor byte strides must be divisible by item size", owner);
  // Where 5.0 has a sentence for the refusal (decoded from its binary), it comes first.
  expect_rejected(make_tensor({2, 2}, kFloat32, std::vector<std::int64_t>{8}, system, data, owner),
                  "Tensor stride rank does not match shape rank (byte_strides has 1 strides for a "
                  "shape of 2)",
                  owner);
  // Strides of the right count whose pointer is null say so, not that the ranks differ.
  expect_rejected(
      make_tensor({2, 2}, kFloat32, TensorByteStridesView(nullptr, 2), system, data, owner),
      "Tensor byte strides pointer is null (byte_strides has 2 strides and no data)", owner);
  expect_rejected(make_tensor({2, -1}, kFloat32, {}, system, data, owner),
                  "Tensor shape dimensions must be non-negative (shape[1] is -1)", owner);
  expect_rejected(make_tensor({2}, DLDataType{kDLFloat, 0, 1}, {}, system, data, owner),
                  "Tensor dtype has zero-sized elements (dtype.bits is 0)", owner);
  expect_rejected(make_tensor({2}, DLDataType{kDLFloat, 32, 0}, {}, system, data, owner),
                  "Tensor dtype has zero-sized elements (dtype.lanes is 0)", owner);
  // The rest are the import's rules, naming the field.
  expect_rejected(make_tensor(std::vector<std::int64_t>(65, 1), kFloat32, {}, system, data, owner),
                  "ndim 65", owner);
  expect_rejected(
      make_tensor({3}, kFloat32, std::vector<std::int64_t>{INT64_MAX / 2}, system, data, owner),
      "strides[0]", owner);
  expect_rejected(make_tensor({INT64_MAX / 2, 4}, kFloat32, {}, system, data, owner), "overflow",
                  owner);
}

TEST(MakeTensor, AStreamTrackedOwnerCountsTheTensorsClaims) {
  auto owner = std::make_shared<StreamTrackedReference>();
  float value = 0.0f;
  {
    auto tensor = make_tensor({1}, kFloat32, {}, MemoryStorageType::kSystem, &value, owner);
    ASSERT_TRUE(tensor.has_value()) << tensor.error().message;
    const Tensor copy = *tensor;  // NOLINT(performance-unnecessary-copy-initialization)
    EXPECT_EQ(owner->handle_claims(), 2);
  }
  EXPECT_EQ(owner->handle_claims(), 0);
  EXPECT_EQ(owner.use_count(), 1);
}

// A release function that counts its calls.
struct CountedRelease {
  std::shared_ptr<int> calls = std::make_shared<int>(0);
  void* released = nullptr;
  TensorMemoryRelease function() {
    return [this, calls = calls](void* data) -> expected<void, Error> {
      ++*calls;
      released = data;
      return {};
    };
  }
};

TEST(MakeTensorRelease, RunsOnceAfterTheLastTensorAndExport) {
  std::vector<float> values(4);
  CountedRelease release;
  DLManagedTensorVersioned* exported = nullptr;
  {
    auto tensor = make_tensor({4}, kFloat32, {}, MemoryStorageType::kSystem, values.data(),
                              release.function());
    ASSERT_TRUE(tensor.has_value()) << tensor.error().message;
    EXPECT_FALSE(tensor->is_read_only());
    const Tensor copy = *tensor;  // NOLINT(performance-unnecessary-copy-initialization)
    exported = copy.to_dlpack_versioned().value();
  }
  EXPECT_EQ(*release.calls, 0);  // the export still names the memory
  exported->deleter(exported);
  EXPECT_EQ(*release.calls, 1);
  EXPECT_EQ(release.released, values.data());
}

TEST(MakeTensorRelease, ARejectionNeverCallsIt) {
  std::vector<float> values(4);
  CountedRelease release;
  auto refused = make_tensor({4}, kFloat32, std::vector<std::int64_t>{3},
                             MemoryStorageType::kSystem, values.data(), release.function());
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, ErrorCode::kInvalidArgument);
  refused = make_tensor({4}, kFloat32, {}, MemoryStorageType::kSystem, nullptr, release.function());
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().message, "make_tensor pointer is null");
  EXPECT_EQ(*release.calls, 0);
}

// Nobody is left to receive a release's failure: it is reported and counted as a DLPack
// deleter's is, and the process goes on.
TEST(MakeTensorRelease, ItsFailureAndExceptionAreReported) {
  float value = 0.0f;
  int calls = 0;
  const std::uint64_t failed = failed_releases();
  ::testing::internal::CaptureStderr();
  {
    auto failing =
        make_tensor({1}, kFloat32, {}, MemoryStorageType::kSystem, &value,
                    [&calls](void*) -> expected<void, Error> {
                      ++calls;
                      return make_unexpected(ErrorCode::kFailure, "the allocator is gone");
                    });
    ASSERT_TRUE(failing.has_value());
    auto throwing = make_tensor({1}, kFloat32, {}, MemoryStorageType::kSystem, &value,
                                [&calls](void*) -> expected<void, Error> {
                                  ++calls;
                                  throw std::runtime_error("a release that throws");
                                });
    ASSERT_TRUE(throwing.has_value());
    auto none =
        make_tensor({1}, kFloat32, {}, MemoryStorageType::kSystem, &value, TensorMemoryRelease{});
    ASSERT_TRUE(none.has_value());
  }
  const std::string printed = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(failed_releases(), failed + 2);
  if (failed + 2 > 16) {
    return;  // earlier tests of this process used up the 16 lines on stderr
  }
  EXPECT_NE(printed.find("a memory release function failed: kFailure: the allocator is gone"),
            std::string::npos)
      << printed;
  EXPECT_NE(printed.find("a memory release function threw: a release that throws"),
            std::string::npos)
      << printed;
}

using MakeTensorReleaseOnFakeCuda = test::FakeCudaTest;

TEST_F(MakeTensorReleaseOnFakeCuda, WaitsForTheDeallocationPoints) {
  std::vector<float> values(4);
  CountedRelease release;
  const cudaStream_t consumer = fake().create_stream(0);
  {
    auto tensor = make_tensor({4}, kFloat32, {}, MemoryStorageType::kSystem, values.data(),
                              release.function());
    ASSERT_TRUE(tensor.has_value()) << tensor.error().message;
    fake().launch(consumer);  // a consumer still reads it on the GPU
    ASSERT_TRUE(tensor->set_deallocation_stream(consumer));
  }
  EXPECT_EQ(pending_deferred_releases(), 1u);
  EXPECT_EQ(*release.calls, 0);
  fake().complete(consumer);
  flush_deferred_releases();
  EXPECT_EQ(*release.calls, 1);
}

}  // namespace
}  // namespace holoscan
