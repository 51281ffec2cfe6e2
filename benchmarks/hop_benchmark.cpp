// A tensor's whole hop between operators, and the two-stream hand-off inside it, done with the
// library and with the raw calls it stands for (the floor), so that both come from the same run.
#include <array>

#include <holoscan/event_pool.hpp>
#include <holoscan/tensor.hpp>

#include "allocation_counter.hpp"
#include "benchmark_cuda.hpp"
#include "reusable_producer.hpp"

namespace {

constexpr int kConsumers = 3;

// One producer stream and kConsumers consumer streams, non-blocking, on device 0.
struct HopStreams {
  cudaStream_t producer = nullptr;
  std::array<cudaStream_t, kConsumers> consumers{};
  HopStreams() {
    (void)cudaStreamCreateWithFlags(&producer, cudaStreamNonBlocking);
    for (auto& consumer : consumers) {
      (void)cudaStreamCreateWithFlags(&consumer, cudaStreamNonBlocking);
    }
  }
  ~HopStreams() {
    (void)cudaDeviceSynchronize();
    (void)cudaStreamDestroy(producer);
    for (auto& consumer : consumers) {
      (void)cudaStreamDestroy(consumer);
    }
  }
  HopStreams(const HopStreams&) = delete;
  HopStreams& operator=(const HopStreams&) = delete;
};

// Import a CUDA tensor, record readiness, let three consumers wait, record their deallocation
// points, and drop it.
void BM_Hop3_Library(benchmark::State& state) {
  if (!holoscan_bench::require_gpu(state)) {
    return;
  }
  holoscan_bench::ReusableProducer* producer = holoscan_bench::device_producer();
  HopStreams streams;
  (void)holoscan::reserve_stream_events(0, 256);
  const auto start = holoscan_bench::thread_allocations();
  const auto events_before = holoscan::created_stream_events(0);
  for (auto _ : state) {
    auto tensor = holoscan::make_tensor_from_dlpack_versioned(&producer->managed);
    tensor->set_readiness_stream(streams.producer);
    for (cudaStream_t consumer : streams.consumers) {
      benchmark::DoNotOptimize(tensor->synchronize_for_consumer_stream(consumer));
      tensor->set_deallocation_stream(consumer);
    }
  }
  holoscan_bench::report_allocations(state, start);
  // Events the pool had to create during the loop (0 once warm), and releases still queued.
  state.counters["events_created"] =
      static_cast<double>(holoscan::created_stream_events(0) - events_before);
  state.counters["pending_at_end"] = static_cast<double>(holoscan::pending_deferred_releases());
  holoscan::flush_deferred_releases();
}
BENCHMARK(BM_Hop3_Library);

// The same ordering by hand: record on the producer, then each consumer waits and records.
void BM_Hop3_Floor(benchmark::State& state) {
  if (!holoscan_bench::require_gpu(state)) {
    return;
  }
  HopStreams streams;
  cudaEvent_t ready = nullptr;
  std::array<cudaEvent_t, kConsumers> done{};
  (void)cudaEventCreateWithFlags(&ready, cudaEventDisableTiming);
  for (auto& event : done) {
    (void)cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
  }
  for (auto _ : state) {
    benchmark::DoNotOptimize(cudaEventRecord(ready, streams.producer));
    for (int i = 0; i < kConsumers; ++i) {
      benchmark::DoNotOptimize(cudaStreamWaitEvent(streams.consumers[i], ready, 0));
      benchmark::DoNotOptimize(cudaEventRecord(done[i], streams.consumers[i]));
    }
  }
  (void)cudaDeviceSynchronize();
  (void)cudaEventDestroy(ready);
  for (auto& event : done) {
    (void)cudaEventDestroy(event);
  }
}
BENCHMARK(BM_Hop3_Floor);

// Readiness on the producer stream, then one consumer on another stream: the hand-off alone.
void BM_Handoff_Library(benchmark::State& state) {
  if (!holoscan_bench::require_gpu(state)) {
    return;
  }
  holoscan_bench::StreamPair streams;
  holoscan::DLManagedMemoryBufferVersioned buffer(nullptr);
  buffer.set_readiness_stream(streams.producer);
  const auto start = holoscan_bench::thread_allocations();
  for (auto _ : state) {
    buffer.set_readiness_stream(streams.producer);
    benchmark::DoNotOptimize(buffer.synchronize_for_consumer(streams.consumer));
  }
  holoscan_bench::report_allocations(state, start);
}
BENCHMARK(BM_Handoff_Library);

}  // namespace
