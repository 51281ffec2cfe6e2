// The floors every hot path is reported against: raw CUDA calls and a raw atomic pair.
#include <atomic>
#include <cstdint>

#include "benchmark_cuda.hpp"

namespace {

void BM_Floor_EventRecord(benchmark::State& state) {
  if (!holoscan_bench::require_gpu(state)) {
    return;
  }
  holoscan_bench::StreamPair streams;
  cudaEvent_t event = nullptr;
  (void)cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
  for (auto _ : state) {
    benchmark::DoNotOptimize(cudaEventRecord(event, streams.producer));
  }
  (void)cudaEventDestroy(event);
}
BENCHMARK(BM_Floor_EventRecord);

void BM_Floor_StreamWaitEvent(benchmark::State& state) {
  if (!holoscan_bench::require_gpu(state)) {
    return;
  }
  holoscan_bench::StreamPair streams;
  cudaEvent_t event = nullptr;
  (void)cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
  (void)cudaEventRecord(event, streams.producer);
  for (auto _ : state) {
    benchmark::DoNotOptimize(cudaStreamWaitEvent(streams.consumer, event, 0));
  }
  (void)cudaEventDestroy(event);
}
BENCHMARK(BM_Floor_StreamWaitEvent);

void BM_Floor_RecordWaitPair(benchmark::State& state) {
  if (!holoscan_bench::require_gpu(state)) {
    return;
  }
  holoscan_bench::StreamPair streams;
  cudaEvent_t event = nullptr;
  (void)cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
  for (auto _ : state) {
    benchmark::DoNotOptimize(cudaEventRecord(event, streams.producer));
    benchmark::DoNotOptimize(cudaStreamWaitEvent(streams.consumer, event, 0));
  }
  (void)cudaEventDestroy(event);
}
BENCHMARK(BM_Floor_RecordWaitPair);

void BM_Floor_EventQueryDone(benchmark::State& state) {
  if (!holoscan_bench::require_gpu(state)) {
    return;
  }
  holoscan_bench::StreamPair streams;
  cudaEvent_t event = nullptr;
  (void)cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
  (void)cudaEventRecord(event, streams.producer);
  (void)cudaEventSynchronize(event);
  for (auto _ : state) {
    benchmark::DoNotOptimize(cudaEventQuery(event));
  }
  (void)cudaEventDestroy(event);
}
BENCHMARK(BM_Floor_EventQueryDone);

void BM_Floor_EventCreateDestroy(benchmark::State& state) {
  if (!holoscan_bench::require_gpu(state)) {
    return;
  }
  for (auto _ : state) {
    cudaEvent_t event = nullptr;
    benchmark::DoNotOptimize(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    benchmark::DoNotOptimize(cudaEventDestroy(event));
  }
}
BENCHMARK(BM_Floor_EventCreateDestroy);

void BM_Floor_AtomicPair(benchmark::State& state) {
  static std::atomic<std::int64_t> counter{0};
  for (auto _ : state) {
    counter.fetch_add(1, std::memory_order_relaxed);
    benchmark::DoNotOptimize(counter.fetch_sub(1, std::memory_order_acq_rel));
  }
}
BENCHMARK(BM_Floor_AtomicPair);
BENCHMARK(BM_Floor_AtomicPair)->Threads(16)->UseRealTime();

}  // namespace
