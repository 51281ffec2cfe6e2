// The floors every hot path is reported against: raw CUDA calls and a raw atomic pair.
#include <atomic>
#include <cstdint>

#include "allocation_counter.hpp"
#include "benchmark_cuda.hpp"

namespace {

using holoscan_bench::StreamPair;

// Times `call(event, streams)` on one untimed event, after `prepare` readied it.
template <class Prepare, class Call>
void time_raw(benchmark::State& state, Prepare prepare, Call call) {
  if (!holoscan_bench::require_gpu(state)) {
    return;
  }
  StreamPair streams;
  cudaEvent_t event = nullptr;
  (void)cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
  prepare(event, streams);
  for (auto _ : state) {
    call(event, streams);
  }
  (void)cudaEventDestroy(event);
}

void nothing(cudaEvent_t, const StreamPair&) {}

void recorded(cudaEvent_t event, const StreamPair& streams) {
  (void)cudaEventRecord(event, streams.producer);
}

void BM_Floor_EventRecord(benchmark::State& state) {
  time_raw(state, nothing, [](cudaEvent_t event, const StreamPair& streams) {
    benchmark::DoNotOptimize(cudaEventRecord(event, streams.producer));
  });
}
BENCHMARK(BM_Floor_EventRecord);

void BM_Floor_StreamWaitEvent(benchmark::State& state) {
  time_raw(state, recorded, [](cudaEvent_t event, const StreamPair& streams) {
    benchmark::DoNotOptimize(cudaStreamWaitEvent(streams.consumer, event, 0));
  });
}
BENCHMARK(BM_Floor_StreamWaitEvent);

void BM_Floor_RecordWaitPair(benchmark::State& state) {
  time_raw(state, nothing, [](cudaEvent_t event, const StreamPair& streams) {
    benchmark::DoNotOptimize(cudaEventRecord(event, streams.producer));
    benchmark::DoNotOptimize(cudaStreamWaitEvent(streams.consumer, event, 0));
  });
}
BENCHMARK(BM_Floor_RecordWaitPair);

void BM_Floor_EventQueryDone(benchmark::State& state) {
  const auto completed = [](cudaEvent_t event, const StreamPair& streams) {
    recorded(event, streams);
    (void)cudaEventSynchronize(event);
  };
  time_raw(state, completed, [](cudaEvent_t event, const StreamPair&) {
    benchmark::DoNotOptimize(cudaEventQuery(event));
  });
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
HOLOSCAN_BENCH_SIXTEEN_THREADS(BM_Floor_AtomicPair);

}  // namespace
