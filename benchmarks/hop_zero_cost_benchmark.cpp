// The hop, the hand-off lifecycle and the pipeline's pool frame over a CUDA table that costs
// nothing (zero_cost_cuda.hpp), with the release thread running: what remains is the library's
// own work per owner's life, on the caller's thread and in the traffic with the release thread.
// Runs without a GPU.
#include <array>
#include <cstddef>
#include <memory>

#include <benchmark/benchmark.h>

#include <holoscan/deferred_release.hpp>
#include <holoscan/event_pool.hpp>
#include <holoscan/pool_memory.hpp>
#include <holoscan/tensor.hpp>
#include <holoscan/tensor_pool.hpp>

#include "allocation_counter.hpp"
#include "reusable_producer.hpp"
#include "zero_cost_cuda.hpp"

namespace {

constexpr int kConsumers = 3;

// Counters of the loop: heap allocations per hop, events the pool had to create (0 once warm),
// releases still queued when it ended.
class LoopCounters {
 public:
  explicit LoopCounters(benchmark::State& state)
      : state_(state),
        allocations_(holoscan_bench::thread_allocations()),
        events_(holoscan::created_stream_events(0)) {}
  ~LoopCounters() {
    holoscan_bench::report_allocations(state_, allocations_);
    state_.counters["events_created"] =
        static_cast<double>(holoscan::created_stream_events(0) - events_);
    state_.counters["pending_at_end"] = static_cast<double>(holoscan::pending_deferred_releases());
  }
  LoopCounters(const LoopCounters&) = delete;
  LoopCounters& operator=(const LoopCounters&) = delete;

 private:
  benchmark::State& state_;
  std::uint64_t allocations_;
  std::size_t events_;
};

// BM_Hop3_Library's loop: import a CUDA tensor, readiness, three consumers wait and record, drop.
void BM_Hop3_ZeroCostCuda(benchmark::State& state) {
  static std::array<float, holoscan_bench::ReusableProducer::kElements> data{};
  // Made before the scope, so it outlives the scope's flush: releases still queued at the end
  // call its deleter.
  holoscan_bench::ReusableProducer producer(data.data(), DLDevice{kDLCUDA, 0});
  holoscan_bench::ZeroCostCudaScope scope;
  const cudaStream_t stream = holoscan_bench::ZeroCostCudaScope::stream(0);
  std::array<cudaStream_t, kConsumers> consumers{};
  for (int i = 0; i < kConsumers; ++i) {
    consumers[static_cast<std::size_t>(i)] = holoscan_bench::ZeroCostCudaScope::stream(i + 1);
  }
  (void)holoscan::reserve_stream_events(0, 256);
  LoopCounters counters(state);
  for (auto _ : state) {
    auto tensor = holoscan::make_tensor_from_dlpack_versioned(&producer.managed);
    tensor->set_readiness_stream(stream);
    for (cudaStream_t consumer : consumers) {
      benchmark::DoNotOptimize(tensor->synchronize_for_consumer_stream(consumer));
      tensor->set_deallocation_stream(consumer);
    }
  }
}
BENCHMARK(BM_Hop3_ZeroCostCuda);

// BM_HandoffLifecycle's loop: a new owner, readiness, one consumer waits and records, drop.
void BM_HandoffLifecycle_ZeroCostCuda(benchmark::State& state) {
  holoscan_bench::ZeroCostCudaScope scope;
  const cudaStream_t producer = holoscan_bench::ZeroCostCudaScope::stream(0);
  const cudaStream_t consumer = holoscan_bench::ZeroCostCudaScope::stream(1);
  (void)holoscan::reserve_stream_events(0, 64);
  LoopCounters counters(state);
  for (auto _ : state) {
    holoscan::DLManagedMemoryBufferVersioned buffer(nullptr);
    buffer.set_readiness_stream(producer);
    benchmark::DoNotOptimize(buffer.synchronize_for_consumer(consumer));
    buffer.set_deallocation_stream(consumer);
  }
}
BENCHMARK(BM_HandoffLifecycle_ZeroCostCuda);

// Device memory that is ordinary static storage: the zero-cost table allocates nothing.
std::array<std::byte, std::size_t{1} << 16> pool_storage{};

class StaticPoolMemory : public holoscan::PoolMemoryProvider {
 public:
  holoscan::expected<std::unique_ptr<holoscan::PoolAllocation>, holoscan::Error> allocate(
      int, std::size_t bytes) override {
    struct Static : holoscan::PoolAllocation {
      void* data() const noexcept override { return pool_storage.data(); }
      std::size_t bytes() const noexcept override { return pool_storage.size(); }
    };
    if (bytes > pool_storage.size()) {
      return holoscan::make_unexpected(holoscan::ErrorCode::kResourceExhausted, "too large");
    }
    return std::unique_ptr<holoscan::PoolAllocation>(new Static());
  }
};

// The pipeline benchmark's library frame with one consumer: stream-ordered allocate from a pool
// of four blocks, readiness, the consumer waits and records, drop (the block keeps its points).
void BM_PoolFrame_ZeroCostCuda(benchmark::State& state) {
  holoscan_bench::ZeroCostCudaScope scope;
  const cudaStream_t producer = holoscan_bench::ZeroCostCudaScope::stream(0);
  const cudaStream_t consumer = holoscan_bench::ZeroCostCudaScope::stream(1);
  holoscan::TensorPoolConfig config;
  config.block_bytes = 4096;
  config.block_count = 4;
  config.memory_provider = std::make_shared<StaticPoolMemory>();
  auto pool = holoscan::TensorPool::create(config);
  if (!pool) {
    state.SkipWithError(pool.error().message.c_str());
    return;
  }
  (void)holoscan::reserve_stream_events(0, 64);
  LoopCounters counters(state);
  const std::int64_t shape[] = {1024};
  for (auto _ : state) {
    auto tensor = (*pool)->allocate(shape, 1, DLDataType{kDLUInt, 32, 1}, producer);
    tensor->set_readiness_stream(producer);
    benchmark::DoNotOptimize(tensor->synchronize_for_consumer_stream(consumer));
    tensor->set_deallocation_stream(consumer);
  }
}
BENCHMARK(BM_PoolFrame_ZeroCostCuda);

}  // namespace
