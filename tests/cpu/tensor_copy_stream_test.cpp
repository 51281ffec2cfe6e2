// Covers the stream-ordered copies against the fake CUDA runtime, whose copies run only once their
// stream (and every event it waits for) has passed them: the copy waits for the producer's
// readiness, keeps the source alive until it has read it, takes its memory stream-ordered and
// frees it after its points, gathers any strides with 2-D copies, and cleans up on every failure.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
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

  // Runs `call` while `stream` holds earlier work, which the "GPU" finishes only once the host
  // waits (for a stream or an event) or the call returned. Returns the frees made before that:
  // frees ahead of what the call queued on `stream`.
  template <class Call>
  std::uint64_t frees_ahead_of_the_stream(cudaStream_t stream, Call&& call) {
    const auto host_waits = [&] {
      return fake().calls(CudaEntry::kStreamSynchronize) +
             fake().calls(CudaEntry::kEventSynchronize);
    };
    flush_deferred_releases();  // earlier calls' frees are not this one's
    fake().launch(stream);
    const auto waits = host_waits();
    const auto frees = fake().calls(CudaEntry::kFreeAsync);
    std::atomic<bool> returned{false};
    std::uint64_t freed_ahead = 0;
    std::thread gpu([&] {
      (void)test::eventually(
          [&] { return host_waits() > waits || returned.load(std::memory_order_acquire); });
      freed_ahead = fake().calls(CudaEntry::kFreeAsync) - frees;
      fake().complete(stream);
    });
    call();
    returned.store(true, std::memory_order_release);
    gpu.join();
    return freed_ahead;
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
  auto memory = std::make_shared<FakeDeviceMemory>(12);  // cudaMalloc: before the capture begins
  fake().set_capture(stream, cudaStreamCaptureStatusActive);
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
    // then the copy's readiness cannot be recorded either: refused, and the copy's memory, with
    // a deallocation point on the stream, is freed once the GPU is done.
    fake().fail_next(CudaEntry::kEventRecord, cudaErrorLaunchFailure, 2);
    const auto syncs = fake().calls(CudaEntry::kStreamSynchronize);
    auto copy = source.copy_to(DLDevice{kDLCUDA, 0}, stream);
    ASSERT_FALSE(copy.has_value());
    EXPECT_EQ(copy.error().code, ErrorCode::kFailure);
    // The failing call and CUDA's error, as for every CUDA failure (they were dropped before).
    EXPECT_EQ(copy.error().message,
              "Tensor::copy_to: the copy's readiness could not be recorded: cudaEventRecord "
              "failed: cudaErrorLaunchFailure (fake runtime error)");
    EXPECT_EQ(copy.error().provenance, static_cast<std::uint64_t>(cudaErrorLaunchFailure));
    EXPECT_EQ(fake().calls(CudaEntry::kStreamSynchronize), syncs + 1);
  }
  flush_deferred_releases();
  EXPECT_EQ(*deleted_, 1);
  EXPECT_EQ(fake().calls(CudaEntry::kFreeAsync), 1u);
}

// A copy into device memory that fails after its first piece was queued (which reads the source
// and writes the copy's memory): the call returns at once, and neither the copy's memory nor the
// source (whose caller drops it on the error) goes before the stream has passed what was queued.
TEST_F(CopyOnFakeCuda, ACopyFailingAfterItsFirstPieceFreesItsMemoryAfterWhatWasQueued) {
  const cudaStream_t stream = fake().create_stream(0);
  const StridedCase permuted{"Permuted", {2, 3, 2, 2, 3}, {3, 24, 1, 12, 6}, 0};  // many pieces
  std::vector<std::int32_t> buffer = test::numbered_buffer(72);
  std::optional<Tensor> source(test::import_view(buffer, permuted, deleted_));
  const auto syncs = fake().calls(CudaEntry::kStreamSynchronize);
  const auto frees = fake().calls(CudaEntry::kFreeAsync);
  int released_ahead = -1;
  const std::uint64_t freed_ahead = frees_ahead_of_the_stream(stream, [&] {
    fake().fail_after(CudaEntry::kMemcpy2DAsync, 1, cudaErrorLaunchFailure);
    auto copy = source->copy_to(DLDevice{kDLCUDA, 0}, stream);
    source.reset();  // the caller's last reference, dropped on the error
    released_ahead = *deleted_;
    ASSERT_FALSE(copy.has_value());
    EXPECT_EQ(copy.error().code, ErrorCode::kFailure);
    EXPECT_NE(copy.error().message.find("cudaMemcpy2DAsync"), std::string::npos)
        << copy.error().message;
  });
  EXPECT_EQ(freed_ahead, 0u) << "the copy's memory was freed under the queued piece";
  EXPECT_EQ(released_ahead, 0) << "the source was released under the queued piece";
  EXPECT_EQ(fake().calls(CudaEntry::kStreamSynchronize), syncs) << "the host waited";
  flush_deferred_releases();
  EXPECT_EQ(*deleted_, 1);
  EXPECT_EQ(fake().calls(CudaEntry::kFreeAsync), frees + 1);
  EXPECT_EQ(fake().live_allocations(), 0u);
}

// The same failure of a copy out to the caller's memory: the caller takes that memory back on the
// error, so the call returns only once nothing queued still writes it.
TEST_F(CopyOnFakeCuda, ACopyOutFailingAfterItsFirstPieceWaitsForWhatWasQueued) {
  const cudaStream_t stream = fake().create_stream(0);
  auto memory = std::make_shared<FakeDeviceMemory>(48);
  const std::vector<std::int64_t> strides{96, 32, 8};  // every other int32 of 2x3 rows of 8
  auto source = make_tensor({2, 3, 2}, kInt32, strides, MemoryStorageType::kDevice,
                            memory->values(), memory, 0);
  ASSERT_TRUE(source.has_value()) << source.error().message;
  fake().launch(stream);
  const auto syncs = fake().calls(CudaEntry::kStreamSynchronize);
  const auto copies =
      fake().calls(CudaEntry::kMemcpyAsync) + fake().calls(CudaEntry::kMemcpy2DAsync);
  std::thread gpu([&] {
    EXPECT_TRUE(wait_for_calls(CudaEntry::kStreamSynchronize, syncs, 1));
    fake().complete(stream);
  });
  fake().fail_after(CudaEntry::kMemcpy2DAsync, 1, cudaErrorLaunchFailure);
  std::vector<std::int32_t> out(12, -1);
  const auto copied = source->copy_to_host_async(out.data(), 48, stream);
  const auto synced = fake().calls(CudaEntry::kStreamSynchronize);
  fake().complete(stream);  // the helper completes the stream only once the host waits
  gpu.join();
  ASSERT_FALSE(copied.has_value());
  EXPECT_EQ(copied.error().code, ErrorCode::kFailure);
  EXPECT_GE(fake().calls(CudaEntry::kMemcpyAsync) + fake().calls(CudaEntry::kMemcpy2DAsync),
            copies + 2);  // a piece was queued before the failing one
  EXPECT_EQ(synced, syncs + 1) << "returned while a queued piece still wrote the caller's memory";
}

// A copy out whose host waits all fail (the wait for the copy, then the one after the failure)
// returns its error with the copy still queued on `stream`: the source keeps a deallocation point
// there, so that dropping it cannot free the memory the queued copy reads. Before, the source's
// memory went at once (a use after free when the stream ran the copy).
TEST_F(CopyOnFakeCuda, ACopyOutWhoseWaitsFailKeepsTheSourceUntilTheQueuedCopyRan) {
  std::optional<Tensor> source = pending_device_source();
  memory_->fill(7);
  fake().complete(producer_);
  fake().launch(stream_);  // earlier work: the copy stays queued behind it
  const auto frees = fake().calls(CudaEntry::kFree);
  fake().fail_next(CudaEntry::kStreamSynchronize, cudaErrorLaunchFailure, 2);
  std::vector<std::int32_t> out(12, -1);
  const auto copied = source->copy_to_host(out.data(), out.size() * 4, stream_);
  ASSERT_FALSE(copied.has_value());
  EXPECT_EQ(copied.error().provenance, static_cast<std::uint64_t>(cudaErrorLaunchFailure));
  source.reset();
  memory_.reset();
  // The release thread would free it within its first rounds: the producer has finished.
  EXPECT_FALSE(test::eventually([&] { return fake().calls(CudaEntry::kFree) > frees; },
                                std::chrono::milliseconds(200)))
      << "the source's memory went under the queued copy";
  fake().complete(stream_);  // the queued copy reads the source here
  flush_deferred_releases();
  EXPECT_EQ(fake().calls(CudaEntry::kFree), frees + 1);
  EXPECT_EQ(out, counting_from(7, 12));
}

// Out of host memory once the copy's memory was taken from `stream` (cudaMallocAsync): the
// memory goes back in the order of that stream, never by a cudaFreeAsync on another stream
// before `stream` has even reached the allocation (undefined behaviour), nor before the stream
// passed a copy queued into it.
TEST_F(CopyOnFakeCuda, OutOfHostMemoryNeverFreesTheCopysMemoryAheadOfItsStream) {
  const cudaStream_t stream = fake().create_stream(0);
  const Tensor source = test::import_view(buffer_, rows_, deleted_);
  ASSERT_TRUE(source.copy_to(DLDevice{kDLCUDA, 0}, stream).has_value());  // warms the pools
  fake().complete(stream);
  flush_deferred_releases();
  std::uint64_t refused = 0;
  std::uint64_t refused_after_queueing = 0;
  // Only the library's allocations fail (the fake runtime's bookkeeping never does, as a real
  // runtime never throws). A successful copy allocates nothing once queued, so the second sweep
  // has the copy's readiness refused (the second event record: the source's point is the first),
  // whose error message the heap then refuses.
  for (const bool refuse_readiness : {false, true}) {
    for (std::uint64_t skip = 0; skip < 100; ++skip) {
      if (refuse_readiness) {
        fake().fail_after(CudaEntry::kEventRecord, 1, cudaErrorLaunchFailure);
      }
      const auto copies =
          fake().calls(CudaEntry::kMemcpyAsync) + fake().calls(CudaEntry::kMemcpy2DAsync);
      std::optional<expected<Tensor, Error>> copy;
      bool threw = false;
      std::uint64_t failed = 0;
      const std::uint64_t freed_ahead = frees_ahead_of_the_stream(stream, [&] {
        test::FailingAllocations failing(skip, 1000);
        try {
          copy.emplace(source.copy_to(DLDevice{kDLCUDA, 0}, stream));
        } catch (...) {
          threw = true;
        }
        failed = failing.failed();
        copy.reset();  // a refused copy's memory goes here, still out of memory
      });
      fake().clear_faults();
      ASSERT_FALSE(threw) << skip << " allocations allowed";
      EXPECT_EQ(freed_ahead, 0u) << "freed while its stream had not passed the allocation or "
                                 << "the copy (" << skip << " allocations allowed)";
      if (failed == 0) {
        break;
      }
      ++refused;
      const bool queued =
          fake().calls(CudaEntry::kMemcpyAsync) + fake().calls(CudaEntry::kMemcpy2DAsync) > copies;
      refused_after_queueing += queued ? 1 : 0;
    }
  }
  EXPECT_GT(refused, 0u);
  EXPECT_GT(refused_after_queueing, 0u);
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

// Rows 2 GiB + 4 bytes apart (a slice of a larger tensor): past memPitch (2^31 - 1), where CUDA
// documents that cudaMemcpy2DAsync may refuse the pitch, the copy goes row by row, and every
// element arrives. The rows lie in a reserved mapping of which only the two pages read are ever
// touched.
TEST_F(CopyOnFakeCuda, RowsFurtherApartThanTheDriversMaxPitchAreCopiedOneByOne) {
  constexpr std::size_t kPitch = (std::size_t{1} << 31) + 4;
  const std::size_t bytes = kPitch + 4096;
  void* mapping = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mapping == MAP_FAILED) {
    GTEST_SKIP() << "no room for a sparse mapping of " << bytes << " bytes";
  }
  auto* rows = static_cast<char*>(mapping);
  const std::vector<std::int32_t> first{1, 2, 3, 4};
  const std::vector<std::int32_t> second{5, 6, 7, 8};
  std::memcpy(rows, first.data(), 16);
  std::memcpy(rows + kPitch, second.data(), 16);
  const cudaStream_t stream = fake().create_stream(0);
  {
    const std::vector<std::int64_t> strides{static_cast<std::int64_t>(kPitch), 4};
    auto source = make_tensor({2, 4}, kInt32, strides, MemoryStorageType::kSystem, mapping,
                              [bytes](void* memory) -> expected<void, Error> {
                                EXPECT_EQ(munmap(memory, bytes), 0);
                                return {};
                              });
    ASSERT_TRUE(source.has_value()) << source.error().message;
    auto on_device = source->copy_to(DLDevice{kDLCUDA, 0}, stream);
    ASSERT_TRUE(on_device.has_value()) << on_device.error().message;
    EXPECT_EQ(read_back(*on_device, stream), counting_from(1, 8));
    EXPECT_EQ(fake().calls(CudaEntry::kMemcpy2DAsync), 0u);
    std::vector<std::int32_t> out(8);
    ASSERT_TRUE(source->copy_to_host_async(out.data(), 32, stream).has_value());
    EXPECT_EQ(out, counting_from(1, 8));  // host memory: copied at once
  }
  flush_deferred_releases();
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
  bool threw = false;
  const std::uint64_t freed_ahead = frees_ahead_of_the_stream(stream, [&] {
    try {
      auto copy = source->copy_to(DLDevice{kDLCUDA, 0}, stream);
      ASSERT_FALSE(copy.has_value());
      EXPECT_EQ(copy.error().code, ErrorCode::kFailure);
      EXPECT_NE(copy.error().message.find("synchronize_for_consumer"), std::string::npos)
          << copy.error().message;
    } catch (...) {
      threw = true;
    }
  });
  EXPECT_FALSE(threw) << "the hook's exception escaped copy_to";
  EXPECT_EQ(freed_ahead, 0u) << "freed ahead of the copy's stream";
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

// A device id past the devices this process has (two here) is the caller's argument too, whatever
// the stream: with a default-stream handle it reached cudaSetDevice, which failed as CUDA's.
TEST_F(CopyOnFakeCuda, ATargetDeviceThatDoesNotExistIsAnInvalidArgumentWhateverTheStream) {
  auto memory = std::make_shared<FakeDeviceMemory>(12);
  const Tensor source = device_tensor(memory);
  for (const cudaStream_t stream : {cudaStream_t{nullptr}, fake().create_stream(0)}) {
    auto copy = source.copy_to(DLDevice{kDLCUDA, 2}, stream);
    ASSERT_FALSE(copy.has_value());
    EXPECT_EQ(copy.error().code, ErrorCode::kInvalidArgument) << copy.error().message;
    EXPECT_NE(copy.error().message.find("device 2"), std::string::npos) << copy.error().message;
  }
  auto pool = TensorPool::create(TensorPoolConfig{PoolMemory::kDevice, 2, 256, 1});
  ASSERT_FALSE(pool.has_value());
  EXPECT_EQ(pool.error().code, ErrorCode::kInvalidArgument) << pool.error().message;
  EXPECT_NE(pool.error().message.find("device 2 is not a CUDA device of this process"),
            std::string::npos)
      << pool.error().message;
}

// A device switch that fails for another reason is CUDA's failure, but the message still names
// the function that refused, as its other refusals do: it began with "cudaSetDevice failed".
TEST_F(CopyOnFakeCuda, AFailedDeviceSwitchNamesTheFunctionThatRefused) {
  auto memory = std::make_shared<FakeDeviceMemory>(12);
  const Tensor source = device_tensor(memory);
  fake().fail_next(CudaEntry::kSetDevice, cudaErrorDevicesUnavailable);
  auto copy = source.copy_to(DLDevice{kDLCUDA, 1}, nullptr);
  ASSERT_FALSE(copy.has_value());
  EXPECT_EQ(copy.error().code, ErrorCode::kFailure) << copy.error().message;
  EXPECT_EQ(copy.error().message.rfind("Tensor::copy_to: cudaSetDevice failed: ", 0), 0u)
      << copy.error().message;
  EXPECT_NE(copy.error().message.find("cudaErrorDevicesUnavailable"), std::string::npos)
      << copy.error().message;
  fake().fail_next(CudaEntry::kSetDevice, cudaErrorDevicesUnavailable);
  auto pool = TensorPool::create(TensorPoolConfig{PoolMemory::kDevice, 1, 256, 1});
  ASSERT_FALSE(pool.has_value());
  EXPECT_EQ(pool.error().code, ErrorCode::kFailure) << pool.error().message;
  EXPECT_EQ(pool.error().message.rfind("TensorPool::create: cudaSetDevice failed: ", 0), 0u)
      << pool.error().message;
}

}  // namespace
}  // namespace holoscan
