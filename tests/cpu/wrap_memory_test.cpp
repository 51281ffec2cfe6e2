// Covers wrap_memory: an existing Tensor pointed at memory someone else owns, its layout as
// make_tensor builds it, the release function run exactly once with the data pointer after the
// last copy and export (never on a rejection, never under a library lock, its failures
// reported), and a rejection that leaves the Tensor as it was.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <memory>
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
constexpr auto kSystem = MemoryStorageType::kSystem;

// A release function that counts its calls and remembers the pointer it was given.
struct CountedRelease {
  std::shared_ptr<std::atomic<int>> calls = std::make_shared<std::atomic<int>>(0);
  std::shared_ptr<void*> released = std::make_shared<void*>(nullptr);
  TensorMemoryRelease function() const {
    return [calls = calls, released = released](void* data) -> expected<void, Error> {
      calls->fetch_add(1);
      *released = data;
      return {};
    };
  }
  int count() const { return calls->load(); }
};

// A writable host tensor over `values`, released through `release`.
Tensor host_tensor(std::vector<float>& values, const CountedRelease& release) {
  auto made = make_tensor({static_cast<std::int64_t>(values.size())}, kFloat32, {}, kSystem,
                          values.data(), release.function());
  EXPECT_TRUE(made.has_value()) << made.error().message;
  return made.has_value() ? std::move(*made) : Tensor();
}

TEST(WrapMemory, PointsTheTensorAtTheMemoryWithItsLayout) {
  std::vector<float> values(6);
  CountedRelease release;
  Tensor tensor;
  const std::vector<std::int64_t> byte_strides{4, 12};  // the transpose of a 2x3 row-major
  auto wrapped = wrap_memory(tensor, {3, 2}, kFloat32, byte_strides, kSystem, values.data(),
                             release.function(), -1);
  ASSERT_TRUE(wrapped.has_value()) << wrapped.error().message;
  EXPECT_EQ(tensor.data(), values.data());
  EXPECT_EQ(tensor.shape(), (std::vector<std::int64_t>{3, 2}));
  EXPECT_EQ(tensor.strides(), byte_strides);
  EXPECT_EQ(tensor.dl_tensor().strides[1], 3);  // DLPack's strides are in elements
  EXPECT_EQ(tensor.dtype().code, kDLFloat);
  EXPECT_EQ(tensor.dtype().bits, 32);
  EXPECT_EQ(tensor.device().device_type, kDLCPU);
  EXPECT_EQ(tensor.version().major, HOLOSCAN_DLPACK_IMPL_VERSION_MAJOR);
  EXPECT_EQ(tensor.flags(), 0u);
  auto data = tensor.mutable_data();  // writer authority
  ASSERT_TRUE(data.has_value()) << data.error().message;
  static_cast<float*>(*data)[5] = 1.5f;
  EXPECT_EQ(values[5], 1.5f);
  EXPECT_EQ(release.count(), 0);
  tensor = Tensor();
  EXPECT_EQ(release.count(), 1);
  EXPECT_EQ(*release.released, values.data());
}

TEST(WrapMemory, StorageTypesGiveMakeTensorsDevices) {
  float value = 0.0f;
  Tensor tensor;
  ASSERT_TRUE(wrap_memory(tensor, {1}, kFloat32, {}, MemoryStorageType::kDevice, &value, {}, 2)
                  .has_value());
  EXPECT_EQ(tensor.device().device_type, kDLCUDA);
  EXPECT_EQ(tensor.device().device_id, 2);
  ASSERT_TRUE(
      wrap_memory(tensor, {1}, kFloat32, {}, MemoryStorageType::kHost, &value, {}, -1).has_value());
  EXPECT_EQ(tensor.device().device_type, kDLCUDAHost);
}

// The former context goes as by assignment: a copy made before keeps it (and its memory), and its
// release runs once that copy is gone too.
TEST(WrapMemory, TheFormerContextStaysWithItsOtherTensors) {
  std::vector<float> before(2, 7.0f);
  std::vector<float> after(4);
  CountedRelease first;
  CountedRelease second;
  Tensor tensor = host_tensor(before, first);
  const Tensor copy = tensor;
  ASSERT_TRUE(wrap_memory(tensor, {4}, kFloat32, {}, kSystem, after.data(), second.function(), -1));
  EXPECT_EQ(tensor.data(), after.data());
  EXPECT_EQ(copy.data(), before.data());
  EXPECT_EQ(copy.size(), 2);
  EXPECT_EQ(first.count(), 0);
  EXPECT_EQ(second.count(), 0);
}

TEST(WrapMemory, ReleasesOnceAfterTheLastCopyAndExport) {
  std::vector<float> values(4);
  CountedRelease release;
  DLManagedTensorVersioned* exported = nullptr;
  {
    Tensor tensor;
    ASSERT_TRUE(
        wrap_memory(tensor, {4}, kFloat32, {}, kSystem, values.data(), release.function(), -1));
    const Tensor copy = tensor;
    auto versioned = copy.to_dlpack_versioned();
    ASSERT_TRUE(versioned.has_value()) << versioned.error().message;
    exported = *versioned;
    tensor = Tensor();
    EXPECT_EQ(release.count(), 0);  // the copy still names the memory
  }
  EXPECT_EQ(release.count(), 0);  // the export still names the memory
  exported->deleter(exported);
  EXPECT_EQ(release.count(), 1);
  EXPECT_EQ(*release.released, values.data());
}

// The owner lives by its holds: the export keeps it without its shared_ptr, counts as a claim,
// and no surplus release of the Tensor's takes the export's hold.
TEST(WrapMemory, AnExportHoldsTheOwnerAloneAndSurplusReleasesTakeNothing) {
  std::vector<float> values{1.0F, 2.0F, 3.0F, 4.0F};
  CountedRelease release;
  Tensor tensor = host_tensor(values, release);
  std::weak_ptr<TensorMemoryReference> watched = tensor.dl_ctx()->memory_reference;
  const auto* owner =
      dynamic_cast<const StreamTrackedReference*>(tensor.dl_ctx()->memory_reference.get());
  ASSERT_NE(owner, nullptr);
  // Published read-only: a mutable export's lease would keep the context, and so the reference.
  tensor.dl_ctx()->tensor.flags |= DLPACK_FLAG_BITMASK_READ_ONLY;
  auto exported = tensor.to_dlpack_versioned();
  ASSERT_TRUE(exported.has_value()) << exported.error().message;
  EXPECT_EQ(owner->handle_claims(), 2);
  tensor.release_handle();  // the Tensor's own claim, given back early
  tensor.release_handle();  // a caller's bug: counted, takes nothing
  EXPECT_EQ(owner->unpaired_releases(), 1u);
  EXPECT_EQ(owner->handle_claims(), 1);
  tensor = Tensor();
  EXPECT_TRUE(watched.expired());
  EXPECT_EQ(release.count(), 0);
  EXPECT_EQ(static_cast<const float*>((*exported)->dl_tensor.data)[3], 4.0F);
  (*exported)->deleter(*exported);
  EXPECT_EQ(release.count(), 1);
}

TEST(WrapMemory, ANullPointerIsRefusedAndTheTensorUntouched) {
  std::vector<float> values(2);
  CountedRelease kept;
  CountedRelease release;
  Tensor tensor = host_tensor(values, kept);
  const auto context = tensor.dl_ctx();
  auto refused = wrap_memory(tensor, {4}, kFloat32, {}, kSystem, nullptr, release.function(), -1);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(refused.error().message, "wrap_memory pointer is null");  // Holoscan 5.0's
  EXPECT_EQ(tensor.dl_ctx(), context);
  EXPECT_EQ(release.count(), 0);
  EXPECT_EQ(kept.count(), 0);
}

// Every layout refusal is make_tensor's, named after wrap_memory: the tensor keeps its context
// and the release is never called (the memory stays the caller's).
TEST(WrapMemory, ABadLayoutIsRefusedWithoutCallingTheRelease) {
  std::vector<float> values(8);
  CountedRelease kept;
  CountedRelease release;
  Tensor tensor = host_tensor(values, kept);
  const auto context = tensor.dl_ctx();
  float* data = values.data();
  const auto expect_refused = [&](const expected<void, Error>& result, const std::string& text) {
    ASSERT_FALSE(result.has_value());
    EXPECT_EQ(result.error().code, ErrorCode::kInvalidArgument);
    EXPECT_EQ(result.error().message.rfind("wrap_memory: ", 0), 0u) << result.error().message;
    EXPECT_NE(result.error().message.find(text), std::string::npos) << result.error().message;
    EXPECT_EQ(tensor.dl_ctx(), context);
  };
  expect_refused(wrap_memory(tensor, {2, 2}, kFloat32, std::vector<std::int64_t>{-8, 4}, kSystem,
                             data, release.function(), -1),
                 "Tensor byte strides must be non-negative");
  expect_refused(wrap_memory(tensor, {2, 2}, kFloat32, std::vector<std::int64_t>{8, 6}, kSystem,
                             data, release.function(), -1),
                 "Tensor byte strides must be divisible by item size");
  expect_refused(wrap_memory(tensor, {2, 2}, kFloat32, std::vector<std::int64_t>{8}, kSystem, data,
                             release.function(), -1),
                 "byte_strides has 1 strides for a shape of 2");
  expect_refused(wrap_memory(tensor, {2, -1}, kFloat32, {}, kSystem, data, release.function(), -1),
                 "shape[1]");
  expect_refused(wrap_memory(tensor, {2}, DLDataType{kDLFloat, 0, 1}, {}, kSystem, data,
                             release.function(), -1),
                 "dtype.bits");
  expect_refused(wrap_memory(tensor, {1}, kFloat32, {}, static_cast<MemoryStorageType>(7), data,
                             release.function(), -1),
                 "Unsupported tensor memory storage type");
  EXPECT_EQ(release.count(), 0);
  EXPECT_EQ(kept.count(), 0);
}

TEST(WrapMemory, AReleaseThatFailsIsReportedAndCounted) {
  float value = 0.0f;
  int calls = 0;
  const std::uint64_t failed = failed_releases();
  {
    Tensor tensor;
    ASSERT_TRUE(wrap_memory(
        tensor, {1}, kFloat32, {}, kSystem, &value,
        [&calls](void*) -> expected<void, Error> {
          ++calls;
          return make_unexpected(ErrorCode::kFailure, "gone");
        },
        -1));
    Tensor throwing;
    ASSERT_TRUE(wrap_memory(
        throwing, {1}, kFloat32, {}, kSystem, &value,
        [&calls](void*) -> expected<void, Error> {
          ++calls;
          throw std::runtime_error("a release that throws");
        },
        -1));
  }
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(failed_releases(), failed + 2);
}

// A release that calls back into the library (wraps and drops more memory, asks the release
// queue) would deadlock on any lock the library held around it.
TEST(WrapMemory, TheReleaseRunsUnderNoLockOfTheLibrary) {
  std::vector<float> values(4);
  std::vector<float> more(4);
  CountedRelease inner;
  int calls = 0;
  {
    Tensor tensor;
    ASSERT_TRUE(wrap_memory(
        tensor, {4}, kFloat32, {}, kSystem, values.data(),
        [&](void*) -> expected<void, Error> {
          ++calls;
          Tensor nested;
          auto wrapped =
              wrap_memory(nested, {4}, kFloat32, {}, kSystem, more.data(), inner.function(), -1);
          (void)pending_deferred_releases();
          return wrapped;
        },
        -1));
  }
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(inner.count(), 1);
}

using WrapMemoryOnFakeCuda = test::FakeCudaTest;

// The release waits for the GPU as make_tensor's does, and runs on the release thread.
TEST_F(WrapMemoryOnFakeCuda, ReleasesAfterTheDeallocationPoints) {
  std::vector<float> values(4);
  CountedRelease release;
  const cudaStream_t consumer = fake().create_stream(0);
  {
    Tensor tensor;
    ASSERT_TRUE(
        wrap_memory(tensor, {4}, kFloat32, {}, kSystem, values.data(), release.function(), -1));
    fake().launch(consumer);  // a consumer still reads it on the GPU
    ASSERT_TRUE(tensor.set_deallocation_stream(consumer));
  }
  EXPECT_EQ(pending_deferred_releases(), 1u);
  EXPECT_EQ(release.count(), 0);
  fake().complete(consumer);
  flush_deferred_releases();
  EXPECT_EQ(release.count(), 1);
  EXPECT_EQ(*release.released, values.data());
}

}  // namespace
}  // namespace holoscan
