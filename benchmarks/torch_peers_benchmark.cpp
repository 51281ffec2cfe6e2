// PyTorch doing the same work as the library's benchmarks, on the same inputs, in the same
// process: import and export through DLPack, the c10 event hand-off, and a whole hop the torch
// way (import, a new CUDAEvent recorded on the producer, three consumers blocked on it).
#include <ATen/ATen.h>
#include <ATen/DLConvertor.h>
#if HOLOSCAN_BENCH_TORCH_CUDA
#include <c10/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include <array>

#include "benchmark_cuda.hpp"
#include "reusable_producer.hpp"

namespace {

void BM_Torch_ImportAndDestroy_Host4D(benchmark::State& state) {
  holoscan_bench::ReusableProducer& producer = holoscan_bench::host_producer();
  for (auto _ : state) {
    at::Tensor tensor = at::fromDLPackVersioned(&producer.managed);
    benchmark::DoNotOptimize(tensor.data_ptr());
  }
}
BENCHMARK(BM_Torch_ImportAndDestroy_Host4D);

void BM_Torch_ExportAndDelete_Host4D(benchmark::State& state) {
  const at::Tensor tensor = at::zeros({8, 3, 32, 32}, at::kFloat);
  for (auto _ : state) {
    DLManagedTensorVersioned* exported = at::toDLPackVersioned(tensor);
    exported->deleter(exported);
  }
}
BENCHMARK(BM_Torch_ExportAndDelete_Host4D);

#if HOLOSCAN_BENCH_TORCH_CUDA
constexpr int kConsumers = 3;

c10::cuda::CUDAStream wrap(cudaStream_t stream) {
  return c10::cuda::getStreamFromExternal(stream, 0);
}

// c10's event hand-off with a reused event: record on the producer, block the consumer.
void BM_Torch_Handoff_C10Event(benchmark::State& state) {
  if (!holoscan_bench::require_gpu(state)) {
    return;
  }
  holoscan_bench::StreamPair streams;
  const c10::cuda::CUDAStream producer = wrap(streams.producer);
  const c10::cuda::CUDAStream consumer = wrap(streams.consumer);
  c10::cuda::CUDAEvent event;
  for (auto _ : state) {
    event.record(producer);
    event.block(consumer);
  }
}
BENCHMARK(BM_Torch_Handoff_C10Event);

void BM_Torch_Hop3(benchmark::State& state) {
  if (!holoscan_bench::require_gpu(state)) {
    return;
  }
  holoscan_bench::ReusableProducer* source = holoscan_bench::device_producer();
  cudaStream_t raw_producer = nullptr;
  std::array<cudaStream_t, kConsumers> raw_consumers{};
  (void)cudaStreamCreateWithFlags(&raw_producer, cudaStreamNonBlocking);
  for (auto& consumer : raw_consumers) {
    (void)cudaStreamCreateWithFlags(&consumer, cudaStreamNonBlocking);
  }
  {
    const c10::cuda::CUDAStream producer = wrap(raw_producer);
    for (auto _ : state) {
      at::Tensor tensor = at::fromDLPackVersioned(&source->managed);
      c10::cuda::CUDAEvent ready;  // torch orders a hand-off with an event of its own
      ready.record(producer);
      for (cudaStream_t consumer : raw_consumers) {
        ready.block(wrap(consumer));
      }
      benchmark::DoNotOptimize(tensor.data_ptr());
    }
  }
  (void)cudaDeviceSynchronize();
  (void)cudaStreamDestroy(raw_producer);
  for (auto& consumer : raw_consumers) {
    (void)cudaStreamDestroy(consumer);
  }
}
BENCHMARK(BM_Torch_Hop3);
#endif  // HOLOSCAN_BENCH_TORCH_CUDA

}  // namespace
