// Covers the pool's stream-ordered allocate against the fake runtime: a dropped block is handed out
// while the GPU still reads it, with the producer stream made to wait for its points (one wait
// each, none for its own), no query and no host wait; and its refusals.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>
#include <memory>

#include "cuda/cuda_api.hpp"
#include "dlpack/recycler.hpp"
#include "holoscan/tensor_pool.hpp"
#include "support/allocation_hooks.hpp"
#include "support/fake_cuda_test.hpp"
#include "support/gtest_printers.hpp"

namespace holoscan {
namespace {

using test::CudaEntry;

constexpr DLDataType kFloat32{kDLFloat, 32, 1};

class PoolStreamOrder : public test::FakeCudaTest {
 protected:
  std::shared_ptr<TensorPool> make_pool(std::size_t blocks) {
    auto pool = TensorPool::create({PoolMemory::kDevice, 0, 1024, blocks});
    EXPECT_TRUE(pool.has_value()) << pool.error().message;
    return pool.has_value() ? *pool : nullptr;
  }
  // An event recorded on `stream` now: done once everything queued on it so far is.
  cudaEvent_t mark(cudaStream_t stream) {
    cudaEvent_t event = nullptr;
    EXPECT_EQ(test::FakeCuda::table().event_create_with_flags(&event, 0), cudaSuccess);
    EXPECT_EQ(test::FakeCuda::table().event_record(event, stream), cudaSuccess);
    return event;
  }
  bool done(cudaEvent_t event) { return test::FakeCuda::table().event_query(event) == cudaSuccess; }
  // Allocates a block on `producer`, ready after the work queued there, hands it to each of
  // `readers` and drops it while they run, each a deallocation point.
  void read_then_drop(TensorPool& pool, cudaStream_t producer,
                      std::initializer_list<cudaStream_t> readers) {
    auto block = pool.allocate({16}, kFloat32, producer);
    ASSERT_TRUE(block.has_value()) << block.error().message;
    ASSERT_TRUE(block->set_readiness_stream(producer));
    for (cudaStream_t reader : readers) {
      ASSERT_TRUE(block->synchronize_for_consumer_stream(reader).has_value());
    }
    for (cudaStream_t reader : readers) {
      fake().launch(reader);
      ASSERT_TRUE(block->set_deallocation_stream(reader));
    }
  }
  // Allocates a block on `producer` and drops it while `reader`, its deallocation point, runs.
  void drop_while_read(TensorPool& pool, cudaStream_t producer, cudaStream_t reader) {
    auto block = pool.allocate({16}, kFloat32, producer);
    ASSERT_TRUE(block.has_value()) << block.error().message;
    fake().launch(reader);
    ASSERT_TRUE(block->set_deallocation_stream(reader));
  }
};

// A ring on one producer stream: the block comes back with its readiness point on that very
// stream, which needs no wait; the stream's id, known once it is located, is not asked again.
TEST_F(PoolStreamOrder, ABlockBackOnItsOwnProducerStreamAsksItsIdOnce) {
  cudaStream_t producer = fake().create_stream(0);
  cudaStream_t reader = fake().create_stream(0);
  auto pool = make_pool(1);
  ASSERT_NE(pool, nullptr);
  fake().launch(producer);
  ASSERT_NO_FATAL_FAILURE(read_then_drop(*pool, producer, {reader}));
  const std::uint64_t ids = fake().calls(CudaEntry::kStreamGetId);
  const std::uint64_t waits = fake().calls(CudaEntry::kStreamWaitEvent);
  auto second = pool->allocate({16}, kFloat32, producer);
  ASSERT_TRUE(second.has_value()) << second.error().message;
  EXPECT_EQ(fake().calls(CudaEntry::kStreamGetId) - ids, 1u) << "the id asked again";
  EXPECT_EQ(fake().calls(CudaEntry::kStreamWaitEvent) - waits, 1u) << "one wait: the reader's";
}

TEST_F(PoolStreamOrder, BusyBlockIsHandedOutWithTheProducerOrderedAfterItsReaders) {
  cudaStream_t producer = fake().create_stream(0);
  cudaStream_t reader_a = fake().create_stream(0);
  cudaStream_t reader_b = fake().create_stream(0);
  auto pool = make_pool(1);
  ASSERT_NE(pool, nullptr);
  ASSERT_NO_FATAL_FAILURE(read_then_drop(*pool, producer, {reader_a, reader_b}));
  EXPECT_EQ(pool->available_blocks(), 0u);  // polling says the readers still run
  const auto queries = fake().calls(CudaEntry::kEventQuery);
  const auto waits = fake().calls(CudaEntry::kStreamWaitEvent);
  auto second = pool->allocate({16}, kFloat32, producer);
  ASSERT_TRUE(second.has_value()) << second.error().message;
  EXPECT_EQ(fake().calls(CudaEntry::kEventQuery), queries);         // nothing asked
  EXPECT_EQ(fake().calls(CudaEntry::kStreamWaitEvent), waits + 2);  // one per reader
  EXPECT_EQ(pool->reuse_count(), 1u);
  EXPECT_FALSE(second->is_read_only());

  // Work the producer queues now runs after both readers.
  const cudaEvent_t write = mark(producer);
  EXPECT_FALSE(done(write));
  fake().complete(reader_a);
  EXPECT_FALSE(done(write));
  fake().complete(reader_b);
  EXPECT_TRUE(done(write));
  (void)test::FakeCuda::table().event_destroy(write);
}

TEST_F(PoolStreamOrder, PointsOnTheProducerItselfNeedNoWait) {
  cudaStream_t producer = fake().create_stream(0);
  auto pool = make_pool(1);
  ASSERT_NE(pool, nullptr);
  {
    auto first = pool->allocate({16}, kFloat32, producer);
    ASSERT_TRUE(first.has_value());
    fake().launch(producer);
    ASSERT_TRUE(first->set_readiness_stream(producer));
    ASSERT_TRUE(first->set_deallocation_stream(producer));
  }
  const auto waits = fake().calls(CudaEntry::kStreamWaitEvent);
  ASSERT_TRUE(pool->allocate({16}, kFloat32, producer).has_value());
  EXPECT_EQ(fake().calls(CudaEntry::kStreamWaitEvent), waits);
}

TEST_F(PoolStreamOrder, NamedBlocksAreNeverHandedOut) {
  cudaStream_t producer = fake().create_stream(0);
  auto pool = make_pool(1);
  ASSERT_NE(pool, nullptr);
  auto held = pool->allocate({16}, kFloat32, producer);
  ASSERT_TRUE(held.has_value());
  auto refused = pool->allocate({16}, kFloat32, producer);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, ErrorCode::kResourceExhausted);
  held->memory_reference()->release_tensor_handle();  // a surplus release changes nothing
  EXPECT_FALSE(pool->allocate({16}, kFloat32, producer).has_value());
}

TEST_F(PoolStreamOrder, CapturingProducerIsRefusedWithoutAWait) {
  cudaStream_t producer = fake().create_stream(0);
  auto pool = make_pool(1);
  ASSERT_NE(pool, nullptr);
  fake().set_capture(producer, cudaStreamCaptureStatusActive);
  const auto waits = fake().calls(CudaEntry::kStreamWaitEvent);
  auto refused = pool->allocate({16}, kFloat32, producer);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, ErrorCode::kNotImplemented);
  EXPECT_EQ(fake().calls(CudaEntry::kStreamWaitEvent), waits);
  fake().set_capture(producer, cudaStreamCaptureStatusNone);
  EXPECT_TRUE(pool->allocate({16}, kFloat32, producer).has_value());
}

TEST_F(PoolStreamOrder, FailedWaitKeepsTheBlockAndItsPoints) {
  cudaStream_t producer = fake().create_stream(0);
  cudaStream_t reader = fake().create_stream(0);
  auto pool = make_pool(1);
  ASSERT_NE(pool, nullptr);
  drop_while_read(*pool, producer, reader);
  fake().fail_next(CudaEntry::kStreamWaitEvent, cudaErrorLaunchFailure);
  auto refused = pool->allocate({16}, kFloat32, producer);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, ErrorCode::kFailure);
  EXPECT_NE(refused.error().message.find("cudaStreamWaitEvent"), std::string::npos);
  EXPECT_NE(refused.error().message.find("cudaErrorLaunchFailure"), std::string::npos);
  // The point is still there: the next try waits for it again.
  const auto waits = fake().calls(CudaEntry::kStreamWaitEvent);
  ASSERT_TRUE(pool->allocate({16}, kFloat32, producer).has_value());
  EXPECT_EQ(fake().calls(CudaEntry::kStreamWaitEvent), waits + 1);
}

// A block handed over and dropped before its new owner recorded anything: the waits ordered only
// the new owner's stream, so the block must still wait for its old reader. Before the fix its
// points were forgotten at the hand-over: a polling allocate handed it to a host writer, and
// another stream's hand-over queued no wait, while the reader still ran.
TEST_F(PoolStreamOrder, ABlockHandedOverAndDroppedUnusedStillWaitsForItsReader) {
  cudaStream_t producer = fake().create_stream(0);
  cudaStream_t other_producer = fake().create_stream(0);
  cudaStream_t reader = fake().create_stream(0);
  auto pool = make_pool(1);
  ASSERT_NE(pool, nullptr);
  drop_while_read(*pool, producer, reader);
  ASSERT_TRUE(pool->allocate({16}, kFloat32, producer).has_value());  // dropped unused
  EXPECT_EQ(pool->available_blocks(), 0u);
  auto polled = pool->allocate({16}, kFloat32);
  ASSERT_FALSE(polled.has_value()) << "handed out while its reader still runs";
  EXPECT_EQ(polled.error().code, ErrorCode::kResourceExhausted);

  ASSERT_TRUE(pool->allocate({16}, kFloat32, other_producer).has_value());  // dropped unused
  const cudaEvent_t write = mark(other_producer);
  EXPECT_FALSE(done(write)) << "another stream's hand-over did not wait for the reader";
  fake().complete(reader);
  EXPECT_TRUE(done(write));
  (void)test::FakeCuda::table().event_destroy(write);
  fake().complete_all();
  EXPECT_TRUE(pool->allocate({16}, kFloat32).has_value());
}

// Four readers, the documented fan-out that needs no heap: with the point the hand-over leaves on
// the producer, the block holds five deallocation points and an uncovered readiness point. Before
// the fix, the next hand-over forgot them through a release list, which took the heap past its
// inline room and, refused, waited on the host for the readiness point under the pool's lock.
TEST_F(PoolStreamOrder, AHandOverOfABlockWithFourReadersTakesNoHeapAndNeverWaits) {
  cudaStream_t producer = fake().create_stream(0);
  cudaStream_t readers[4];
  for (cudaStream_t& reader : readers) {
    reader = fake().create_stream(0);
  }
  auto pool = make_pool(1);
  ASSERT_NE(pool, nullptr);
  const auto produce_and_read = [&] {
    auto block = pool->allocate({16}, kFloat32, producer);
    ASSERT_TRUE(block.has_value()) << block.error().message;
    fake().launch(producer);
    ASSERT_TRUE(block->set_readiness_stream(producer));
    for (cudaStream_t reader : readers) {
      ASSERT_TRUE(block->synchronize_for_consumer_stream(reader).has_value());
    }
    // The readiness passed, unpolled (a host wait on it returns at once); the readers still run.
    fake().complete_all();
    for (cudaStream_t reader : readers) {
      fake().launch(reader);
      ASSERT_TRUE(block->set_deallocation_stream(reader));
    }
  };
  produce_and_read();
  produce_and_read();  // warm: events pooled, control blocks recycled
  // Room in the fake's own list of the producer's waits, so that the fake takes no heap below.
  const cudaEvent_t read = mark(readers[0]);
  for (int i = 0; i < 100; ++i) {
    ASSERT_EQ(test::FakeCuda::table().stream_wait_event(producer, read, 0), cudaSuccess);
  }
  (void)test::FakeCuda::table().event_destroy(read);
  produce_and_read();
  const auto host_waits = fake().calls(CudaEntry::kEventSynchronize);
  const std::int64_t shape[] = {16};
  bool allocated = false;
  std::uint64_t refused = 0;
#if HOLOSCAN_DLPACK_RECYCLE
  {
    test::FailingAllocations failing(0, 1000);
    allocated = pool->allocate(shape, 1, kFloat32, producer).has_value();
    refused = failing.failed();
  }
#else  // AddressSanitizer builds take every control block from the heap: the host wait is checked
  allocated = pool->allocate(shape, 1, kFloat32, producer).has_value();
#endif
  EXPECT_TRUE(allocated);
  EXPECT_EQ(refused, 0u) << "the hand-over asked the heap";
  EXPECT_EQ(fake().calls(CudaEntry::kEventSynchronize), host_waits) << "the hand-over waited";
  fake().complete_all();
}

// Another thread captures a graph in global mode while this one polls the pool: every event query
// of the poll must be made in relaxed mode, or CUDA refuses it and invalidates that capture.
// Before the fix the readiness point (polled on its own since a waiter's point no longer stands
// for it) was queried in the caller's mode: the capture was invalidated.
TEST_F(PoolStreamOrder, PollingTheReadinessNeverInvalidatesAnotherThreadsCapture) {
  cudaStream_t producer = fake().create_stream(0);
  cudaStream_t captured = fake().create_stream(0);
  auto pool = make_pool(1);
  ASSERT_NE(pool, nullptr);
  {
    auto block = pool->allocate({16}, kFloat32);
    ASSERT_TRUE(block.has_value());
    fake().launch(producer);  // the writer still runs
    ASSERT_TRUE(block->set_readiness_stream(producer));
  }
  fake().set_capture(captured, cudaStreamCaptureStatusActive);
  const auto capture = [&] {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    EXPECT_EQ(test::FakeCuda::table().stream_is_capturing(captured, &status), cudaSuccess);
    return status;
  };
  EXPECT_EQ(pool->available_blocks(), 0u);
  EXPECT_EQ(capture(), cudaStreamCaptureStatusActive) << "a poll invalidated the capture";
  EXPECT_FALSE(pool->allocate({16}, kFloat32).has_value());
  EXPECT_EQ(capture(), cudaStreamCaptureStatusActive) << "a poll invalidated the capture";
  fake().complete(producer);
  EXPECT_TRUE(pool->allocate({16}, kFloat32).has_value()) << "the writer's point never passed";
  EXPECT_EQ(capture(), cudaStreamCaptureStatusActive) << "a poll invalidated the capture";
  fake().set_capture(captured, cudaStreamCaptureStatusNone);
}

// Out of host memory, every refusal of allocate() is an error returned, never std::bad_alloc (its
// messages are built on the heap): a request that cannot fit, a capturing stream, a failed wait.
// Before the fix each of the three threw.
TEST_F(PoolStreamOrder, RefusalsOutOfHostMemoryAreReturnedNeverThrown) {
  cudaStream_t producer = fake().create_stream(0);
  cudaStream_t reader = fake().create_stream(0);
  cudaStream_t capturing = fake().create_stream(0);
  auto pool = make_pool(1);
  ASSERT_NE(pool, nullptr);
  drop_while_read(*pool, producer, reader);
  fake().set_capture(capturing, cudaStreamCaptureStatusActive);
  fake().fail_next(CudaEntry::kStreamWaitEvent, cudaErrorLaunchFailure);
  const std::int64_t too_big[] = {1 << 20};
  const std::int64_t fits[] = {16};
  int threw = 0;
  bool refused[3] = {false, false, false};
  {
    test::FailingAllocations failing(0, 1000);
    const auto attempt = [&](auto&& call) {
      try {
        return !call().has_value();
      } catch (...) {
        ++threw;
        return true;
      }
    };
    refused[0] = attempt([&] { return pool->allocate(too_big, 1, kFloat32); });
    refused[1] = attempt([&] { return pool->allocate(fits, 1, kFloat32, capturing); });
    refused[2] = attempt([&] { return pool->allocate(fits, 1, kFloat32, producer); });
  }
  EXPECT_EQ(threw, 0) << "allocate() threw std::bad_alloc";
  EXPECT_TRUE(refused[0] && refused[1] && refused[2]);
  fake().clear_faults();
  fake().set_capture(capturing, cudaStreamCaptureStatusNone);
  EXPECT_TRUE(pool->allocate(fits, 1, kFloat32, producer).has_value()) << "the block was lost";
}

}  // namespace
}  // namespace holoscan
