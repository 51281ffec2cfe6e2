// Tensor-level stream ordering of imported CUDA tensors, DLPack export/import round trips that
// keep the device pointer, the device and the memory alive, and owning copies (copy_to,
// copy_to_host) that wait for a slow producer and keep the source alive while they read it.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <holoscan/deferred_release.hpp>
#include <holoscan/make_tensor.hpp>
#include <holoscan/tensor.hpp>
#include <holoscan/tensor_pool.hpp>
#include <iostream>
#include <memory>
#include <vector>

#include "gpu/gpu_test_fixture.hpp"
#include "gpu/kernels.hpp"
#include "support/tensor_helpers.hpp"

namespace holoscan::test {
namespace {

constexpr std::int64_t kElements = 1 << 15;
constexpr std::uint64_t kProducerDelayUs = 5'000;
constexpr DLDataType kUInt32{kDLUInt, 32, 1};

class TensorGpuTest : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) {
      return;
    }
    HDL_ASSERT_CUDA(cudaGetDevice(&device_));
    producer_ = make_stream();
    consumer_ = make_stream();
    data_ = device_alloc_zeroed(kElements);
    ASSERT_NE(data_, nullptr);
    auto imported = make_tensor_from_dlpack_versioned(
        make_versioned_device_tensor(DeviceTensorSpec{data_, kElements, device_, &probe_, true}));
    ASSERT_TRUE(imported.has_value()) << imported.error().message;
    tensor_ = std::move(*imported);
    imported_ = true;
  }

  void TearDown() override {
    tensor_ = Tensor();
    GpuTest::TearDown();
    if (imported_) {
      EXPECT_EQ(probe_.calls(), 1) << "the producer's deleter must run exactly once";
    }
  }

  // A slow producer writes the pattern of `seed`; its readiness is recorded on its stream.
  void produce(std::uint32_t seed) {
    HDL_ASSERT_CUDA(launch_slow_fill(data_, kElements, seed, kProducerDelayUs, producer_));
    ASSERT_TRUE(tensor_.set_readiness_stream(producer_));
  }

  // A view of the imported memory written by hand: `shape` and element `strides` from the
  // element `first` (its own context, sharing the import's memory reference).
  Tensor view_of(std::vector<std::int64_t> shape, std::vector<std::int64_t> strides,
                 std::int64_t first) const {
    auto context = std::make_shared<DLManagedTensorContext>(*tensor_.dl_ctx());
    context->dl_shape = std::move(shape);
    context->dl_strides = std::move(strides);
    DLTensor& view = context->tensor.dl_tensor;
    view.ndim = static_cast<std::int32_t>(context->dl_shape.size());
    view.shape = context->dl_shape.data();
    view.strides = context->dl_strides.data();
    view.byte_offset = static_cast<std::uint64_t>(first) * 4;
    return Tensor(context);
  }

  bool imported_ = false;
  int device_ = 0;
  cudaStream_t producer_ = nullptr;
  cudaStream_t consumer_ = nullptr;
  std::uint32_t* data_ = nullptr;
  DeleterProbe probe_;
  Tensor tensor_;
};

TEST_F(TensorGpuTest, ImportedDeviceTensorDescribesTheMemory) {
  EXPECT_EQ(tensor_.data(), data_);
  EXPECT_EQ(tensor_.device().device_type, kDLCUDA);
  EXPECT_EQ(tensor_.device().device_id, device_);
  EXPECT_EQ(tensor_.shape(), std::vector<std::int64_t>{kElements});
  EXPECT_EQ(tensor_.nbytes(), kElements * 4);
  EXPECT_TRUE(tensor_.is_contiguous());
}

TEST_F(TensorGpuTest, SynchronizeForConsumerOrdersAfterTheProducerStream) {
  constexpr std::uint32_t kSeed = 0x7E5;
  DeviceArray<CheckResult> result(1);
  // Before any readiness point the Tensor says so instead of succeeding silently.
  EXPECT_FALSE(tensor_.has_readiness_stream_contract());
  auto refused = tensor_.synchronize_for_consumer_stream(consumer_);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, ErrorCode::kNotImplemented);

  auto* data = static_cast<std::uint32_t*>(tensor_.data());
  HDL_ASSERT_CUDA(launch_slow_fill(data, kElements, kSeed, kProducerDelayUs, producer_));
  ASSERT_TRUE(tensor_.set_readiness_stream(producer_));
  EXPECT_TRUE(tensor_.has_readiness_stream_contract());
  EXPECT_EQ(tensor_.memory_reference()->readiness_stream(), producer_);
  auto synced = tensor_.synchronize_for_consumer_stream(consumer_);
  ASSERT_TRUE(synced.has_value()) << synced.error().message;
  HDL_ASSERT_CUDA(launch_check(data, kElements, kSeed, 0, result.get(), consumer_));
  ASSERT_TRUE(tensor_.set_deallocation_stream(consumer_));
  HDL_ASSERT_CUDA(cudaStreamSynchronize(consumer_));
  EXPECT_EQ(query_stream(producer_), cudaSuccess) << "the consumer did not wait for the producer";
  EXPECT_EQ(result.at(0).mismatches, 0u);
  EXPECT_EQ(result.at(0).checksum, expected_checksum(kSeed, kElements));
}

TEST_F(TensorGpuTest, DroppingTheLastHandleDefersTheDeleterPastConsumers) {
  DeviceArray<CheckResult> result(1);
  probe_.watch({consumer_});
  HDL_ASSERT_CUDA(launch_slow_fill(data_, kElements, 3, 0, producer_));
  ASSERT_TRUE(tensor_.set_readiness_stream(producer_));
  ASSERT_TRUE(tensor_.synchronize_for_consumer_stream(consumer_).has_value());
  HDL_ASSERT_CUDA(launch_check(data_, kElements, 3, 100'000, result.get(), consumer_));
  ASSERT_TRUE(tensor_.set_deallocation_stream(consumer_));
  Tensor copy = tensor_;
  tensor_ = Tensor();
  EXPECT_EQ(probe_.calls(), 0) << "a copy still holds the memory";
  copy = Tensor();
  EXPECT_EQ(probe_.calls(), 0) << "the consumer still reads the memory";
  EXPECT_EQ(query_stream(consumer_), cudaErrorNotReady) << "dropping the handle blocked";
  flush_deferred_releases();
  ASSERT_EQ(probe_.calls(), 1);
  ASSERT_EQ(probe_.stream_status_at_delete().size(), 1u);
  EXPECT_EQ(probe_.stream_status_at_delete()[0], cudaSuccess);
  EXPECT_EQ(result.at(0).mismatches, 0u);
}

TEST_F(TensorGpuTest, VersionedExportRoundTripKeepsPointerDeviceAndMemory) {
  constexpr std::uint32_t kSeed = 0xE4;
  DeviceArray<CheckResult> result(1);
  HDL_ASSERT_CUDA(launch_slow_fill(data_, kElements, kSeed, 0, producer_));
  HDL_ASSERT_CUDA(cudaStreamSynchronize(producer_));

  auto exported = tensor_.to_dlpack_versioned();
  ASSERT_TRUE(exported.has_value()) << exported.error().message;
  const DLManagedTensorVersioned* managed = *exported;
  EXPECT_EQ(managed->version.major, 1u);
  EXPECT_EQ(static_cast<char*>(managed->dl_tensor.data) + managed->dl_tensor.byte_offset,
            static_cast<char*>(tensor_.data()));
  EXPECT_EQ(managed->dl_tensor.device.device_type, kDLCUDA);
  EXPECT_EQ(managed->dl_tensor.device.device_id, device_);
  ASSERT_EQ(managed->dl_tensor.ndim, 1);
  EXPECT_EQ(managed->dl_tensor.shape[0], kElements);

  auto reimported = make_tensor_from_dlpack_versioned(*exported);
  ASSERT_TRUE(reimported.has_value()) << reimported.error().message;
  Tensor back = std::move(*reimported);
  EXPECT_EQ(back.data(), static_cast<void*>(data_));
  EXPECT_EQ(back.device().device_type, kDLCUDA);
  EXPECT_EQ(back.device().device_id, device_);
  EXPECT_EQ(back.shape(), tensor_.shape());
  EXPECT_EQ(back.strides(), tensor_.strides());
  EXPECT_EQ(back.dtype().code, tensor_.dtype().code);
  EXPECT_EQ(back.dtype().bits, tensor_.dtype().bits);

  tensor_ = Tensor();
  EXPECT_EQ(probe_.calls(), 0) << "the round-tripped tensor must keep the memory alive";
  // Reading through the survivor: a premature cudaFree would show here and under memcheck.
  HDL_ASSERT_CUDA(launch_check(static_cast<const std::uint32_t*>(back.data()), kElements, kSeed, 0,
                               result.get(), consumer_));
  ASSERT_TRUE(back.set_deallocation_stream(consumer_));
  back = Tensor();
  flush_deferred_releases();
  EXPECT_EQ(probe_.calls(), 1);
  EXPECT_EQ(result.at(0).mismatches, 0u);
  EXPECT_EQ(result.at(0).checksum, expected_checksum(kSeed, kElements));
}

TEST_F(TensorGpuTest, LegacyExportRoundTripKeepsPointerAndDevice) {
  auto refused = tensor_.to_dlpack();  // read-only authority has no legacy form
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, ErrorCode::kNotSupported);
  auto exported = writable_view_of(tensor_).to_dlpack();
  ASSERT_TRUE(exported.has_value()) << exported.error().message;
  auto reimported = make_tensor_from_dlpack(*exported);
  ASSERT_TRUE(reimported.has_value()) << reimported.error().message;
  Tensor back = std::move(*reimported);
  EXPECT_EQ(back.data(), static_cast<void*>(data_));
  EXPECT_EQ(back.device().device_type, kDLCUDA);
  EXPECT_EQ(back.device().device_id, device_);
  EXPECT_EQ(back.shape(), tensor_.shape());
  tensor_ = Tensor();
  EXPECT_EQ(probe_.calls(), 0);
  back = Tensor();
  EXPECT_EQ(probe_.calls(), 1) << "no stream used the memory: the release is inline";
}

// --- owning copies: each must wait for the slow producer, or it reads zeros ----------------------

TEST_F(TensorGpuTest, DeviceCopyWaitsForTheSlowProducer) {
  constexpr std::uint32_t kSeed = 0xC0;
  DeviceArray<CheckResult> result(1);
  // The stream-ordered allocator's first allocation sets its pool up, which can take longer than
  // the producer's spin: do it before the race, or copy_to would seem to have blocked.
  void* warm = nullptr;
  HDL_ASSERT_CUDA(cudaMallocAsync(&warm, kElements * sizeof(std::uint32_t), consumer_));
  HDL_ASSERT_CUDA(cudaFreeAsync(warm, consumer_));
  HDL_ASSERT_CUDA(cudaStreamSynchronize(consumer_));
  // Asked before the race: its first call runs a 50 ms probe, which would outlast the producer.
  const bool concurrent = GpuTest::streams_run_concurrently();
  produce(kSeed);
  const cudaStream_t reader = make_stream();
  auto copy = tensor_.copy_to(DLDevice{kDLCUDA, device_}, consumer_);
  ASSERT_TRUE(copy.has_value()) << copy.error().message;
  EXPECT_NE(copy->data(), tensor_.data());
  if (concurrent) {  // else the producer's kernel ran before the copy
    EXPECT_EQ(query_stream(producer_), cudaErrorNotReady) << "copy_to blocked on the producer";
  }
  // A reader on a third stream goes through the copy's readiness, as any consumer would.
  ASSERT_TRUE(copy->synchronize_for_consumer_stream(reader).has_value());
  HDL_ASSERT_CUDA(launch_check(static_cast<const std::uint32_t*>(copy->data()), kElements, kSeed, 0,
                               result.get(), reader));
  HDL_ASSERT_CUDA(cudaStreamSynchronize(reader));
  EXPECT_EQ(result.at(0).mismatches, 0u);
  EXPECT_EQ(result.at(0).checksum, expected_checksum(kSeed, kElements));
}

TEST_F(TensorGpuTest, HostCopiesHoldTheProducedValuesOnReturn) {
  constexpr std::uint32_t kSeed = 0xC1;
  produce(kSeed);
  auto host = tensor_.copy_to(DLDevice{kDLCPU, 0}, consumer_);
  ASSERT_TRUE(host.has_value()) << host.error().message;
  const auto* values = static_cast<const std::uint32_t*>(host->data());
  std::vector<std::uint32_t> out(kElements);
  ASSERT_TRUE(tensor_.copy_to_host(out.data(), out.size() * 4, consumer_).has_value());
  for (std::int64_t i = 0; i < kElements; i += 997) {
    ASSERT_EQ(values[i], pattern_value(kSeed, i)) << i;
    ASSERT_EQ(out[i], pattern_value(kSeed, i)) << i;
  }
}

TEST_F(TensorGpuTest, AsyncHostCopyIsOrderedOnItsStream) {
  constexpr std::uint32_t kSeed = 0xC2;
  produce(kSeed);
  std::vector<std::uint32_t> out(kElements, 0);
  void* pinned = nullptr;
  HDL_ASSERT_CUDA(cudaMallocHost(&pinned, kElements * 4));
  ASSERT_TRUE(tensor_.copy_to_host_async(pinned, kElements * 4, consumer_).has_value());
  HDL_ASSERT_CUDA(cudaStreamSynchronize(consumer_));
  const auto* values = static_cast<const std::uint32_t*>(pinned);
  for (std::int64_t i = 0; i < kElements; i += 991) {
    ASSERT_EQ(values[i], pattern_value(kSeed, i)) << i;
  }
  HDL_EXPECT_CUDA(cudaFreeHost(pinned));
}

TEST_F(TensorGpuTest, SourceDeleterWaitsForTheCopyThatReadsIt) {
  probe_.watch({consumer_});
  produce(0xC3);
  auto copy = tensor_.copy_to(DLDevice{kDLCUDA, device_}, consumer_);
  ASSERT_TRUE(copy.has_value()) << copy.error().message;
  tensor_ = Tensor();
  EXPECT_EQ(probe_.calls(), 0) << "the copy still reads the source";
  HDL_ASSERT_CUDA(cudaStreamSynchronize(consumer_));
  flush_deferred_releases();
  ASSERT_EQ(probe_.calls(), 1);
  EXPECT_EQ(probe_.stream_status_at_delete()[0], cudaSuccess);
}

TEST_F(TensorGpuTest, StridedDeviceViewIsGathered) {
  constexpr std::uint32_t kSeed = 0xC4;
  produce(kSeed);
  HDL_ASSERT_CUDA(cudaStreamSynchronize(producer_));
  // Every other column of a 256 x 256 view, rows reversed: negative and non-unit strides.
  constexpr std::int64_t kRows = kElements / 256;
  constexpr std::int64_t kColumns = 128;
  const Tensor strided = view_of({kRows, kColumns}, {-256, 2}, (kRows - 1) * 256);
  auto copy = strided.copy_to(DLDevice{kDLCUDA, device_}, consumer_);
  ASSERT_TRUE(copy.has_value()) << copy.error().message;
  std::vector<std::uint32_t> out(kRows * kColumns);
  ASSERT_TRUE(copy->copy_to_host(out.data(), out.size() * 4, consumer_).has_value());
  for (std::int64_t r = 0; r < kRows; r += 7) {
    for (std::int64_t c = 0; c < kColumns; c += 5) {
      ASSERT_EQ(out[r * kColumns + c], pattern_value(kSeed, (kRows - 1 - r) * 256 + 2 * c))
          << r << ", " << c;
    }
  }
}

// Columns reversed (an image flipped left to right): the innermost stride is negative, so each
// piece's rows come from the outer dimension, with the copy's pitch for them (one 2-D copy per
// column instead of one call per element).
TEST_F(TensorGpuTest, ReversedColumnsAreGatheredByColumn) {
  constexpr std::uint32_t kSeed = 0xC6;
  produce(kSeed);
  HDL_ASSERT_CUDA(cudaStreamSynchronize(producer_));
  constexpr std::int64_t kRows = kElements / 256;
  constexpr std::int64_t kColumns = 256;
  const Tensor flipped = view_of({kRows, kColumns}, {kColumns, -1}, kColumns - 1);
  auto copy = flipped.copy_to(DLDevice{kDLCUDA, device_}, consumer_);
  ASSERT_TRUE(copy.has_value()) << copy.error().message;
  std::vector<std::uint32_t> out(kRows * kColumns);
  ASSERT_TRUE(copy->copy_to_host(out.data(), out.size() * 4, consumer_).has_value());
  for (std::int64_t r = 0; r < kRows; ++r) {
    for (std::int64_t c = 0; c < kColumns; ++c) {
      ASSERT_EQ(out[r * kColumns + c], pattern_value(kSeed, r * kColumns + (kColumns - 1 - c)))
          << r << ", " << c;
    }
  }
}

TEST_F(TensorGpuTest, CopyIntoADevicePoolBlock) {
  constexpr std::uint32_t kSeed = 0xC5;
  DeviceArray<CheckResult> result(1);
  auto pool = TensorPool::create({PoolMemory::kDevice, device_, kElements * 4, 2});
  ASSERT_TRUE(pool.has_value()) << pool.error().message;
  produce(kSeed);
  const cudaStream_t reader = make_stream();
  auto copy = tensor_.copy_to(**pool, consumer_);
  ASSERT_TRUE(copy.has_value()) << copy.error().message;
  ASSERT_TRUE(copy->synchronize_for_consumer_stream(reader).has_value());
  HDL_ASSERT_CUDA(launch_check(static_cast<const std::uint32_t*>(copy->data()), kElements, kSeed, 0,
                               result.get(), reader));
  ASSERT_TRUE(copy->set_deallocation_stream(reader));
  HDL_ASSERT_CUDA(cudaStreamSynchronize(reader));
  EXPECT_EQ(result.at(0).mismatches, 0u);
}

// Rows 2 GiB + 4 bytes apart (a slice of a larger tensor): the library's copies (row by row past
// memPitch, which CUDA documents as a 2-D copy's limit) are right on the device and to the host.
// What the driver answers a raw 2-D copy with that pitch is printed (the H200's, CUDA 13:
// cudaSuccess, 2026-12-03).
TEST_F(TensorGpuTest, RowsFurtherApartThanMemPitchAreCopied) {
  constexpr std::size_t kPitch = (std::size_t{1} << 31) + 4;
  int max_pitch = 0;
  HDL_ASSERT_CUDA(cudaDeviceGetAttribute(&max_pitch, cudaDevAttrMaxPitch, device_));
  EXPECT_EQ(max_pitch, 2147483647);
  void* rows = nullptr;
  HDL_ASSERT_CUDA(cudaMalloc(&rows, kPitch + 4096));
  const std::vector<std::uint32_t> values{1, 2, 3, 4, 5, 6, 7, 8};
  HDL_ASSERT_CUDA(cudaMemcpy(rows, values.data(), 16, cudaMemcpyHostToDevice));
  HDL_ASSERT_CUDA(
      cudaMemcpy(static_cast<char*>(rows) + kPitch, values.data() + 4, 16, cudaMemcpyHostToDevice));
  std::vector<std::uint32_t> out(8, 0);
  const cudaError_t raw =
      cudaMemcpy2DAsync(out.data(), 16, rows, kPitch, 16, 2, cudaMemcpyDefault, consumer_);
  (void)cudaStreamSynchronize(consumer_);
  (void)cudaGetLastError();
  std::cout << "[ info ] a raw cudaMemcpy2DAsync with a pitch past memPitch: "
            << cudaGetErrorName(raw) << "\n";
  out.assign(8, 0);
  const std::vector<std::int64_t> strides{static_cast<std::int64_t>(kPitch), 4};
  auto source = make_tensor({2, 4}, kUInt32, strides, MemoryStorageType::kDevice, rows,
                            [](void* memory) -> expected<void, Error> {
                              return cudaFree(memory) == cudaSuccess
                                         ? expected<void, Error>{}
                                         : make_unexpected(ErrorCode::kFailure, "cudaFree");
                            });
  ASSERT_TRUE(source.has_value()) << source.error().message;
  ASSERT_TRUE(source->copy_to_host(out.data(), 32, consumer_).has_value());
  EXPECT_EQ(out, values);
  auto on_device = source->copy_to(DLDevice{kDLCUDA, device_}, consumer_);
  ASSERT_TRUE(on_device.has_value()) << on_device.error().message;
  std::vector<std::uint32_t> back(8, 0);
  ASSERT_TRUE(on_device->copy_to_host(back.data(), 32, consumer_).has_value());
  EXPECT_EQ(back, values);
}

TEST_F(TensorGpuTest, MakeTensorOverDeviceMemoryTakesThePointersDevice) {
  auto owner = std::make_shared<StreamTrackedReference>();
  auto wrapped = make_tensor({kElements}, kUInt32, {}, MemoryStorageType::kDevice, data_, owner);
  ASSERT_TRUE(wrapped.has_value()) << wrapped.error().message;
  EXPECT_EQ(wrapped->device().device_type, kDLCUDA);
  EXPECT_EQ(wrapped->device().device_id, device_);
  std::vector<std::uint32_t> host(4);
  auto refused = make_tensor({4}, kUInt32, {}, MemoryStorageType::kDevice, host.data(), owner);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace holoscan::test
