// The stream and claim hooks of a DLPack owner, to be read against floors_benchmark's rows.
#include <memory>

#include <holoscan/dlpack.hpp>
#include <holoscan/event_pool.hpp>

#include "allocation_counter.hpp"
#include "benchmark_cuda.hpp"

namespace {

// Counts heap allocations over the timed loop: the hot paths must make none after warm-up.
class AllocationProbe {
 public:
  explicit AllocationProbe(benchmark::State& state)
      : state_(state), start_(holoscan_bench::thread_allocations()) {}
  ~AllocationProbe() { holoscan_bench::report_allocations(state_, start_); }
  AllocationProbe(const AllocationProbe&) = delete;
  AllocationProbe& operator=(const AllocationProbe&) = delete;

 private:
  benchmark::State& state_;
  std::uint64_t start_;
};

using holoscan::DLManagedMemoryBufferVersioned;
using holoscan_bench::StreamPair;

// Times `hook` on one owner after `warm_up` has taken the owner's events from the pool.
template <class WarmUp, class Hook>
void time_hook(benchmark::State& state, WarmUp warm_up, Hook hook) {
  if (!holoscan_bench::require_gpu(state)) {
    return;
  }
  StreamPair streams;
  DLManagedMemoryBufferVersioned buffer(nullptr);
  warm_up(buffer, streams);
  AllocationProbe probe(state);
  for (auto _ : state) {
    benchmark::DoNotOptimize(hook(buffer, streams));
  }
}

void record_readiness(DLManagedMemoryBufferVersioned& buffer, const StreamPair& streams) {
  buffer.set_readiness_stream(streams.producer);
}

void BM_SetReadinessStream(benchmark::State& state) {
  time_hook(state, record_readiness, [](auto& buffer, const StreamPair& streams) {
    return buffer.set_readiness_stream(streams.producer);
  });
}
BENCHMARK(BM_SetReadinessStream);

void BM_SynchronizeForConsumer_OtherStream(benchmark::State& state) {
  time_hook(state, record_readiness, [](auto& buffer, const StreamPair& streams) {
    return buffer.synchronize_for_consumer(streams.consumer);
  });
}
BENCHMARK(BM_SynchronizeForConsumer_OtherStream);

void BM_SynchronizeForConsumer_SameStream(benchmark::State& state) {
  time_hook(state, record_readiness, [](auto& buffer, const StreamPair& streams) {
    return buffer.synchronize_for_consumer(streams.producer);
  });
}
BENCHMARK(BM_SynchronizeForConsumer_SameStream);

void BM_SetDeallocationStream(benchmark::State& state) {
  const auto record_deallocation = [](auto& buffer, const StreamPair& streams) {
    return buffer.set_deallocation_stream(streams.consumer);
  };
  time_hook(state, record_deallocation, record_deallocation);
}
BENCHMARK(BM_SetDeallocationStream);

// A whole hand-off on an owner constructed in place: readiness, one consumer, deallocation, and
// the destruction that queries (and, while the GPU is behind, defers) the release.
void BM_HandoffLifecycle(benchmark::State& state) {
  if (!holoscan_bench::require_gpu(state)) {
    return;
  }
  holoscan_bench::StreamPair streams;
  (void)holoscan::reserve_stream_events(0, 64);
  for (auto _ : state) {
    holoscan::DLManagedMemoryBufferVersioned buffer(nullptr);
    buffer.set_readiness_stream(streams.producer);
    benchmark::DoNotOptimize(buffer.synchronize_for_consumer(streams.consumer));
    buffer.set_deallocation_stream(streams.consumer);
  }
  holoscan::flush_deferred_releases();
}
BENCHMARK(BM_HandoffLifecycle);

void BM_RetainRelease(benchmark::State& state) {
  static holoscan::DLManagedMemoryBufferVersioned buffer(nullptr);
  AllocationProbe probe(state);
  for (auto _ : state) {
    buffer.retain_tensor_handle();
    buffer.release_tensor_handle();
  }
}
BENCHMARK(BM_RetainRelease);
HOLOSCAN_BENCH_SIXTEEN_THREADS(BM_RetainRelease);

}  // namespace
