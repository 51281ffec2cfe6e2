// Covers the stream-ordered copies against the fake CUDA runtime, whose copies run only once their
// stream (and every event it waits for) has passed them: the copy waits for the producer's
// readiness, keeps the source alive until it has read it, takes its memory stream-ordered and
// frees it after its points, gathers any strides with 2-D copies, and cleans up on every failure.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "cuda/cuda_api.hpp"
#include "holoscan/make_tensor.hpp"
#include "holoscan/tensor.hpp"
#include "holoscan/tensor_pool.hpp"
#include "support/allocation_hooks.hpp"
#include "support/fake_cuda_test.hpp"
#include "support/gtest_printers.hpp"
#include "support/strided_views.hpp"

namespace holoscan {
namespace {

using test::CudaEntry;
using test::StridedCase;

constexpr DLDataType kInt32{kDLInt, 32, 1};

// "Device" memory of the fake runtime (host memory it reports as kDLCUDA), filled with
// 100, 101, ... and owned by a reference that tracks streams (or by one that does not).
class FakeDeviceMemory final : public StreamTrackedReference {
 public:
  explicit FakeDeviceMemory(std::size_t count) : count_(count) {
    EXPECT_EQ(detail::cuda().malloc(&memory_, count * 4), cudaSuccess);
    fill(100);
  }
  ~FakeDeviceMemory() override {
    release_when_safe([](void* memory) noexcept { (void)detail::cuda().free(memory); }, memory_);
  }
  void fill(std::int32_t first) {
    for (std::size_t i = 0; i < count_; ++i) {
      values()[i] = first + static_cast<std::int32_t>(i);
    }
  }
  std::int32_t* values() const { return static_cast<std::int32_t*>(memory_); }

 private:
  void* memory_ = nullptr;
  std::size_t count_;
};

class UntrackedOwner final : public TensorMemoryReference {};

// A caller's owner whose deallocation hook throws (TensorMemoryReference's hooks are not noexcept).
class ThrowingOwner final : public TensorMemoryReference {
 public:
  bool set_deallocation_stream(cudaStream_t /*stream*/) override {
    throw std::runtime_error("deallocation hook failed");
  }
  bool tracks_deallocation_stream() const noexcept override { return true; }
};

// A caller's owner with a readiness contract whose consumer hook throws.
class ThrowingReadinessOwner final : public TensorMemoryReference {
 public:
  bool has_readiness_stream_contract() const noexcept override { return true; }
  expected<void, Error> synchronize_for_consumer(cudaStream_t /*stream*/) override {
    throw std::runtime_error("readiness hook failed");
  }
};

class CopyOnFakeCuda : public test::FakeCudaTest {
 protected:
  CopyOnFakeCuda() : FakeCudaTest(2) {}

  // A 3x4 int32 tensor over fake device memory.
  Tensor device_tensor(const std::shared_ptr<FakeDeviceMemory>& memory) {
    auto tensor =
        make_tensor({3, 4}, kInt32, {}, MemoryStorageType::kDevice, memory->values(), memory, 0);
    EXPECT_TRUE(tensor.has_value()) << tensor.error().message;
    return tensor.has_value() ? std::move(*tensor) : Tensor();
  }

  std::vector<std::int32_t> read_back(const Tensor& tensor, cudaStream_t stream) {
    std::vector<std::int32_t> out(static_cast<std::size_t>(tensor.size()) + 1);
    auto copied = tensor.copy_to_host(out.data(), out.size() * 4, stream);
    EXPECT_TRUE(copied.has_value()) << copied.error().message;
    out.pop_back();
    return out;
  }

  static std::vector<std::int32_t> counting_from(std::int32_t first, std::size_t count) {
    std::vector<std::int32_t> values(count);
    for (std::size_t i = 0; i < count; ++i) {
      values[i] = first + static_cast<std::int32_t>(i);
    }
    return values;
  }

  // A source over fake device memory (zeros) whose producer still runs on producer_.
  Tensor pending_device_source() {
    producer_ = fake().create_stream(0);
    stream_ = fake().create_stream(0);
    memory_ = std::make_shared<FakeDeviceMemory>(12);
    Tensor source = device_tensor(memory_);
    memory_->fill(0);
    fake().launch(producer_);
    EXPECT_TRUE(source.memory_reference()->set_readiness_stream(producer_));
    return source;
  }

  cudaStream_t producer_ = nullptr;
  cudaStream_t stream_ = nullptr;
  std::shared_ptr<FakeDeviceMemory> memory_;
  std::vector<std::int32_t> buffer_ = std::vector<std::int32_t>(12, 0);
  std::shared_ptr<int> deleted_ = std::make_shared<int>(0);
  const StridedCase& compact_ = test::strided_cases()[0];
  StridedCase rows_{"Rows", {3, 4}, {4, 1}, 0};
};

TEST_F(CopyOnFakeCuda, DeviceCopyWaitsForTheProducersReadiness) {
  const cudaStream_t producer = fake().create_stream(0);
  const cudaStream_t stream = fake().create_stream(0);
  {
    const Tensor source = test::import_view(buffer_, rows_, deleted_);
    fake().launch(producer);  // the producer's kernel has not written the values yet
    ASSERT_TRUE(source.memory_reference()->set_readiness_stream(producer));
    const auto waits = fake().calls(CudaEntry::kStreamWaitEvent);
    auto copy = source.copy_to(DLDevice{kDLCUDA, 0}, stream);
    ASSERT_TRUE(copy.has_value()) << copy.error().message;
    EXPECT_EQ(fake().calls(CudaEntry::kStreamWaitEvent), waits + 1);
    EXPECT_EQ(fake().calls(CudaEntry::kMallocAsync), 1u);
    EXPECT_TRUE(copy->has_readiness_stream_contract());
    EXPECT_EQ(copy->readiness_stream(), stream);
    EXPECT_FALSE(copy->is_read_only());
    const auto values = counting_from(100, 12);  // the producer writes, then its stream completes
    std::copy(values.begin(), values.end(), buffer_.begin());
    fake().complete(producer);
    EXPECT_EQ(read_back(*copy, stream), counting_from(100, 12));
  }
  flush_deferred_releases();
  EXPECT_EQ(*deleted_, 1);
  EXPECT_EQ(fake().calls(CudaEntry::kFreeAsync), 1u);
}

TEST_F(CopyOnFakeCuda, SourceAndCopyMemoryOutliveThePendingCopy) {
  const cudaStream_t stream = fake().create_stream(0);
  buffer_ = counting_from(7, 12);
  fake().launch(stream);  // earlier work on the copy stream: the copy is queued behind it
  {
    Tensor source = test::import_view(buffer_, rows_, deleted_);
    auto copy = source.copy_to(DLDevice{kDLCUDA, 0}, stream);
    ASSERT_TRUE(copy.has_value()) << copy.error().message;
    source = Tensor();
    EXPECT_EQ(*deleted_, 0) << "the source went before the copy read it";
    EXPECT_EQ(pending_deferred_releases(), 1u);
  }
  EXPECT_EQ(fake().calls(CudaEntry::kFreeAsync), 0u) << "the copy's memory went before the copy";
  fake().complete(stream);
  flush_deferred_releases();
  EXPECT_EQ(*deleted_, 1);
  EXPECT_EQ(fake().calls(CudaEntry::kFreeAsync), 1u);
}

TEST_F(CopyOnFakeCuda, HostTargetsAreCompleteOnReturn) {
  const cudaStream_t stream = fake().create_stream(0);
  auto memory = std::make_shared<FakeDeviceMemory>(12);
  const Tensor source = device_tensor(memory);
  for (const DLDeviceType type : {kDLCPU, kDLCUDAHost}) {
    const auto syncs = fake().calls(CudaEntry::kStreamSynchronize);
    auto copy = source.copy_to(DLDevice{type, 0}, stream);
    ASSERT_TRUE(copy.has_value()) << copy.error().message;
    EXPECT_EQ(copy->device().device_type, type);
    EXPECT_GT(fake().calls(CudaEntry::kStreamSynchronize), syncs);
    const auto* values = static_cast<const std::int32_t*>(copy->data());
    EXPECT_EQ(std::vector<std::int32_t>(values, values + 12), counting_from(100, 12));
  }
  EXPECT_EQ(fake().calls(CudaEntry::kMallocHost), 1u);
  EXPECT_EQ(fake().calls(CudaEntry::kFreeHost), 1u);
}

TEST_F(CopyOnFakeCuda, ManagedTargetIsStreamOrdered) {
  const cudaStream_t stream = fake().create_stream(0);
  auto memory = std::make_shared<FakeDeviceMemory>(12);
  auto copy = device_tensor(memory).copy_to(DLDevice{kDLCUDAManaged, 0}, stream);
  ASSERT_TRUE(copy.has_value()) << copy.error().message;
  EXPECT_EQ(copy->device().device_type, kDLCUDAManaged);
  EXPECT_EQ(copy->readiness_stream(), stream);
  EXPECT_EQ(fake().calls(CudaEntry::kMallocManaged), 1u);
  EXPECT_EQ(read_back(*copy, stream), counting_from(100, 12));
}

TEST_F(CopyOnFakeCuda, CopyToHostAsyncIsQueuedAfterTheProducer) {
  const Tensor source = pending_device_source();
  std::vector<std::int32_t> out(12, -1);
  ASSERT_TRUE(source.copy_to_host_async(out.data(), 48, stream_).has_value());
  EXPECT_EQ(out, std::vector<std::int32_t>(12, -1)) << "copied before the producer finished";
  EXPECT_EQ(memory_->deallocation_point_count(), 1u);  // the source outlives the queued read
  memory_->fill(100);
  fake().complete(producer_);
  EXPECT_EQ(out, counting_from(100, 12));
}

TEST_F(CopyOnFakeCuda, CopyToHostBlocksUntilTheProducerFinished) {
  const Tensor source = pending_device_source();
  std::thread gpu([&] {
    ASSERT_TRUE(wait_for_calls(CudaEntry::kStreamSynchronize, 0, 1));
    memory_->fill(100);
    fake().complete(producer_);
  });
  std::vector<std::int32_t> out(12, -1);
  const auto copied = source.copy_to_host(out.data(), 48, stream_);
  gpu.join();
  ASSERT_TRUE(copied.has_value()) << copied.error().message;
  EXPECT_EQ(out, counting_from(100, 12));
}

TEST_F(CopyOnFakeCuda, AnOwnerThatTracksNoStreamMakesTheCallWait) {
  const cudaStream_t stream = fake().create_stream(0);
  auto memory = std::make_shared<FakeDeviceMemory>(12);
  auto untracked = make_tensor({12}, kInt32, {}, MemoryStorageType::kDevice, memory->values(),
                               std::make_shared<UntrackedOwner>());
  ASSERT_TRUE(untracked.has_value()) << untracked.error().message;
  std::vector<std::int32_t> out(12, -1);
  const auto syncs = fake().calls(CudaEntry::kStreamSynchronize);
  ASSERT_TRUE(untracked->copy_to_host_async(out.data(), 48, stream).has_value());
  EXPECT_EQ(fake().calls(CudaEntry::kStreamSynchronize), syncs + 1);
  ASSERT_TRUE(device_tensor(memory).copy_to_host_async(out.data(), 48, stream).has_value());
  EXPECT_EQ(fake().calls(CudaEntry::kStreamSynchronize), syncs + 1);  // tracked: no wait
}

TEST_F(CopyOnFakeCuda, StreamMustBeOfTheTargetDevice) {
  const cudaStream_t stream = fake().create_stream(0);
  auto memory = std::make_shared<FakeDeviceMemory>(12);
  const Tensor source = device_tensor(memory);
  auto refused = source.copy_to(DLDevice{kDLCUDA, 1}, stream);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, ErrorCode::kInvalidArgument);
  // A default-stream handle means the target's default stream, and the caller's device stays.
  auto copy = source.copy_to(DLDevice{kDLCUDA, 1}, nullptr);
  ASSERT_TRUE(copy.has_value()) << copy.error().message;
  EXPECT_EQ(fake().current_device(), 0);
  EXPECT_EQ(copy->device().device_id, 1);
  auto located = dldevice_from_pointer(copy->data());
  ASSERT_TRUE(located.has_value());
  EXPECT_EQ(located->device_id, 1);
  EXPECT_EQ(read_back(*copy, fake().create_stream(1)), counting_from(100, 12));
}

TEST_F(CopyOnFakeCuda, ACapturingStreamIsRefusedBeforeAnyAllocation) {
  const cudaStream_t stream = fake().create_stream(0);
  fake().set_capture(stream, cudaStreamCaptureStatusActive);
  auto memory = std::make_shared<FakeDeviceMemory>(12);
  auto refused = device_tensor(memory).copy_to(DLDevice{kDLCUDA, 0}, stream);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, ErrorCode::kNotImplemented);
  EXPECT_EQ(fake().calls(CudaEntry::kMallocAsync), 0u);
  fake().set_capture(stream, cudaStreamCaptureStatusNone);
}

struct CopyFault {
  const char* name;
  CudaEntry entry;
  cudaError_t error;
  const char* call;
};

class CopyFaults : public CopyOnFakeCuda, public ::testing::WithParamInterface<CopyFault> {};

TEST_P(CopyFaults, FailIsKFailureWithProvenanceAndLeaksNothing) {
  const CopyFault& fault = GetParam();
  const cudaStream_t stream = fake().create_stream(0);
  {
    const Tensor source = test::import_view(buffer_, rows_, deleted_);
    fake().fail_next(fault.entry, fault.error);
    auto copy = source.copy_to(DLDevice{kDLCUDA, 0}, stream);
    ASSERT_FALSE(copy.has_value());
    EXPECT_EQ(copy.error().code, ErrorCode::kFailure);
    EXPECT_EQ(copy.error().provenance, static_cast<std::uint64_t>(fault.error));
    EXPECT_NE(copy.error().message.find(fault.call), std::string::npos) << copy.error().message;
  }
  flush_deferred_releases();
  EXPECT_EQ(*deleted_, 1);
  EXPECT_EQ(fake().live_allocations(), 0u);
}

INSTANTIATE_TEST_SUITE_P(EveryCall, CopyFaults,
                         ::testing::Values(CopyFault{"Allocation", CudaEntry::kMallocAsync,
                                                     cudaErrorMemoryAllocation, "cudaMallocAsync"},
                                           CopyFault{"Copy", CudaEntry::kMemcpyAsync,
                                                     cudaErrorInvalidValue, "cudaMemcpyAsync"}),
                         [](const ::testing::TestParamInfo<CopyFault>& param) {
                           return param.param.name;
                         });

TEST_F(CopyOnFakeCuda, UnrecordedPointsWaitOrFailAndLeakNothing) {
  const cudaStream_t stream = fake().create_stream(0);
  {
    const Tensor source = test::import_view(buffer_, rows_, deleted_);
    // The source's deallocation point cannot be recorded: the call waits for the copy instead;
    // then the copy's readiness cannot be recorded either: refused, after the GPU is done.
    fake().fail_next(CudaEntry::kEventRecord, cudaErrorLaunchFailure, 2);
    const auto syncs = fake().calls(CudaEntry::kStreamSynchronize);
    auto copy = source.copy_to(DLDevice{kDLCUDA, 0}, stream);
    ASSERT_FALSE(copy.has_value());
    EXPECT_EQ(copy.error().code, ErrorCode::kFailure);
    EXPECT_NE(copy.error().message.find("readiness"), std::string::npos) << copy.error().message;
    EXPECT_EQ(fake().calls(CudaEntry::kStreamSynchronize), syncs + 2);
  }
  flush_deferred_releases();
  EXPECT_EQ(*deleted_, 1);
  EXPECT_EQ(fake().calls(CudaEntry::kFreeAsync), 1u);
}

// Out of host memory once the copy's memory was taken from `stream` (cudaMallocAsync): the
// memory goes back in the order of that stream, never by a cudaFreeAsync on another stream
// before `stream` has even reached the allocation (undefined behaviour).
TEST_F(CopyOnFakeCuda, OutOfHostMemoryNeverFreesTheCopysMemoryAheadOfItsStream) {
  const cudaStream_t stream = fake().create_stream(0);
  const Tensor source = test::import_view(buffer_, rows_, deleted_);
  ASSERT_TRUE(source.copy_to(DLDevice{kDLCUDA, 0}, stream).has_value());  // warms the pools
  fake().complete(stream);
  flush_deferred_releases();
  fake().launch(stream);  // earlier work on the copy stream, still running
  std::uint64_t refused = 0;
  for (std::uint64_t skip = 0; skip < 100; ++skip) {
    const auto copies =
        fake().calls(CudaEntry::kMemcpyAsync) + fake().calls(CudaEntry::kMemcpy2DAsync);
    const auto frees = fake().calls(CudaEntry::kFreeAsync);
    std::optional<expected<Tensor, Error>> copy;
    bool threw = false;
    std::uint64_t failed = 0;
    {
      test::FailingAllocations failing(skip, 1000);
      try {
        copy.emplace(source.copy_to(DLDevice{kDLCUDA, 0}, stream));
      } catch (...) {
        threw = true;
      }
      failed = failing.failed();
    }
    if (failed == 0) {
      ASSERT_TRUE(copy.has_value() && copy->has_value());
      break;
    }
    // Only the library's own failures: once the copy is queued the fake runtime's bookkeeping
    // allocates too, which a real runtime would not throw from.
    const bool queued =
        fake().calls(CudaEntry::kMemcpyAsync) + fake().calls(CudaEntry::kMemcpy2DAsync) > copies;
    if ((threw || !copy->has_value()) && !queued) {
      ++refused;
      EXPECT_EQ(fake().calls(CudaEntry::kFreeAsync), frees)
          << "freed while its stream had not reached the allocation (" << skip
          << " allocations allowed)";
    }
  }
  EXPECT_GT(refused, 0u);
  fake().complete(stream);
  flush_deferred_releases();
  EXPECT_EQ(fake().live_allocations(), 0u);
}

class StridedCopyOnFakeCuda : public CopyOnFakeCuda,
                              public ::testing::WithParamInterface<StridedCase> {};

TEST_P(StridedCopyOnFakeCuda, DeviceCopyAndReadBackGatherEveryStride) {
  const StridedCase& view = GetParam();
  const cudaStream_t stream = fake().create_stream(0);
  std::vector<std::int32_t> buffer = test::numbered_buffer(128);
  {
    const Tensor source = test::import_view(buffer, view, deleted_);
    auto on_device = source.copy_to(DLDevice{kDLCUDA, 0}, stream);
    ASSERT_TRUE(on_device.has_value()) << on_device.error().message;
    EXPECT_TRUE(on_device->is_contiguous());
    EXPECT_EQ(read_back(*on_device, stream), test::gathered(buffer, view));
    auto again = on_device->copy(stream);  // device to device
    ASSERT_TRUE(again.has_value()) << again.error().message;
    EXPECT_EQ(read_back(*again, stream), test::gathered(buffer, view));
  }
  flush_deferred_releases();
  EXPECT_EQ(*deleted_, 1);
}

INSTANTIATE_TEST_SUITE_P(EveryStride, StridedCopyOnFakeCuda,
                         ::testing::ValuesIn(test::strided_cases()),
                         [](const ::testing::TestParamInfo<StridedCase>& param) {
                           return param.param.name;
                         });

TEST_F(CopyOnFakeCuda, PaddedRowsAreOneRectangle) {
  const cudaStream_t stream = fake().create_stream(0);
  std::vector<std::int32_t> buffer = test::numbered_buffer(128);
  const Tensor padded = test::import_view(buffer, test::strided_cases()[7], deleted_);
  ASSERT_TRUE(padded.copy_to(DLDevice{kDLCUDA, 0}, stream).has_value());
  EXPECT_EQ(fake().calls(CudaEntry::kMemcpy2DAsync), 1u);  // 2x3 rows of 4, one rectangle
  EXPECT_EQ(fake().calls(CudaEntry::kMemcpyAsync), 0u);
}

TEST_F(CopyOnFakeCuda, IntoADevicePoolBlock) {
  const cudaStream_t stream = fake().create_stream(0);
  auto pool = TensorPool::create({PoolMemory::kDevice, 0, 256, 1});
  ASSERT_TRUE(pool.has_value()) << pool.error().message;
  auto memory = std::make_shared<FakeDeviceMemory>(12);
  {
    auto copy = device_tensor(memory).copy_to(**pool, stream);
    ASSERT_TRUE(copy.has_value()) << copy.error().message;
    EXPECT_EQ(copy->readiness_stream(), stream);
    EXPECT_NE(copy->flags() & DLPACK_FLAG_BITMASK_IS_COPIED, 0u);
    EXPECT_EQ(read_back(*copy, stream), counting_from(100, 12));
  }
  pool->reset();
}

// copy_to(pool) queues the copy into the block, then asks the source's owner to keep its memory
// until then. Should that hook throw, the block would go back to the pool with the copy still
// queued to write it, and the next allocate() hand it out under the copy: the call waits for the
// copy on the host instead, and the throw becomes its error.
TEST_F(CopyOnFakeCuda, ASourceOwnerWhoseHookThrowsNeverLeavesTheCopyWritingABlockHandedOutAgain) {
  const cudaStream_t stream = fake().create_stream(0);
  auto pool = TensorPool::create({PoolMemory::kDevice, 0, 48, 1});
  ASSERT_TRUE(pool.has_value()) << pool.error().message;
  auto memory = std::make_shared<FakeDeviceMemory>(12);
  auto source = make_tensor({12}, kInt32, {}, MemoryStorageType::kDevice, memory->values(),
                            std::make_shared<ThrowingOwner>());
  ASSERT_TRUE(source.has_value()) << source.error().message;
  fake().launch(stream);  // the copy stays queued until the GPU passes this work
  const auto syncs = fake().calls(CudaEntry::kStreamSynchronize);
  std::thread gpu([&] {  // the GPU finishes once the host waits (or after a while, if it never)
    (void)test::eventually([&] { return fake().calls(CudaEntry::kStreamSynchronize) > syncs; },
                           std::chrono::seconds(2));
    fake().complete(stream);
  });
  bool threw = false;
  try {
    auto copy = source->copy_to(**pool, stream);
    ASSERT_FALSE(copy.has_value());
    EXPECT_EQ(copy.error().code, ErrorCode::kFailure);
  } catch (...) {
    threw = true;
  }
  auto next = (*pool)->allocate({12}, kInt32);
  ASSERT_TRUE(next.has_value()) << next.error().message;
  auto* mine = static_cast<std::int32_t*>(*next->mutable_data());
  std::fill(mine, mine + 12, -7);  // the new owner's data
  gpu.join();
  fake().complete_all();
  EXPECT_FALSE(threw) << "the hook's exception escaped copy_to";
  EXPECT_EQ(std::vector<std::int32_t>(mine, mine + 12), std::vector<std::int32_t>(12, -7))
      << "the queued copy wrote into the block handed out again";
  *next = Tensor();  // the block goes back before the pool is reset
  pool->reset();
}

// The source's readiness hook throws once the copy's memory was taken from its stream (busy with
// earlier work). Before the fix the exception escaped copy_to and the memory was freed at once by
// cudaFreeAsync on another stream, ahead of the copy's stream reaching the allocation.
TEST_F(CopyOnFakeCuda,
       ASourceOwnerWhoseReadinessHookThrowsIsAFailureAndTheMemoryWaitsForItsStream) {
  const cudaStream_t stream = fake().create_stream(0);
  auto memory = std::make_shared<FakeDeviceMemory>(12);
  auto source = make_tensor({12}, kInt32, {}, MemoryStorageType::kDevice, memory->values(),
                            std::make_shared<ThrowingReadinessOwner>());
  ASSERT_TRUE(source.has_value()) << source.error().message;
  fake().launch(stream);  // earlier work on the copy's stream, still running
  const auto syncs = fake().calls(CudaEntry::kStreamSynchronize);
  const auto frees = fake().calls(CudaEntry::kFreeAsync);
  std::uint64_t frees_before_the_stream_passed = 0;
  std::thread gpu([&] {  // the GPU finishes once the host waits (or after a while, if it never)
    (void)test::eventually([&] { return fake().calls(CudaEntry::kStreamSynchronize) > syncs; },
                           std::chrono::seconds(2));
    frees_before_the_stream_passed = fake().calls(CudaEntry::kFreeAsync);
    fake().complete(stream);
  });
  bool threw = false;
  try {
    auto copy = source->copy_to(DLDevice{kDLCUDA, 0}, stream);
    ASSERT_FALSE(copy.has_value());
    EXPECT_EQ(copy.error().code, ErrorCode::kFailure);
    EXPECT_NE(copy.error().message.find("synchronize_for_consumer"), std::string::npos)
        << copy.error().message;
  } catch (...) {
    threw = true;
  }
  gpu.join();
  EXPECT_FALSE(threw) << "the hook's exception escaped copy_to";
  EXPECT_EQ(frees_before_the_stream_passed, frees) << "freed ahead of the copy's stream";
  fake().complete_all();
  flush_deferred_releases();
}

// Before the fix a default-stream handle took the negative id to cudaSetDevice: kFailure
// (cudaErrorInvalidDevice), while an explicit stream gave kInvalidArgument.
TEST_F(CopyOnFakeCuda, ANegativeTargetDeviceIsAnInvalidArgumentWhateverTheStream) {
  auto memory = std::make_shared<FakeDeviceMemory>(12);
  const Tensor source = device_tensor(memory);
  for (const cudaStream_t stream : {cudaStream_t{nullptr}, fake().create_stream(0)}) {
    auto copy = source.copy_to(DLDevice{kDLCUDA, -1}, stream);
    ASSERT_FALSE(copy.has_value());
    EXPECT_EQ(copy.error().code, ErrorCode::kInvalidArgument) << copy.error().message;
    EXPECT_NE(copy.error().message.find("device id -1 is negative"), std::string::npos)
        << copy.error().message;
  }
}

}  // namespace
}  // namespace holoscan
