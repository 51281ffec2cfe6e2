// Tensor import, export, copies and pool allocation; host memory, so they run on any machine.
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>

#include <holoscan/make_tensor.hpp>
#include <holoscan/tensor.hpp>
#include <holoscan/tensor_pool.hpp>

#include <benchmark/benchmark.h>
#include "allocation_counter.hpp"
#include "reusable_producer.hpp"

namespace {

using holoscan_bench::host_producer;

using holoscan_bench::report_allocations;

// Exports `tensor` and runs the export's deleter, once an iteration.
void export_and_delete(benchmark::State& state, const holoscan::Tensor& tensor) {
  const auto start = holoscan_bench::thread_allocations();
  for (auto _ : state) {
    auto exported = tensor.to_dlpack_versioned();
    (*exported)->deleter(*exported);
  }
  report_allocations(state, start);
}

// A host pool of `blocks` blocks of 64 KiB.
holoscan::expected<std::shared_ptr<holoscan::TensorPool>> host_pool(std::size_t blocks) {
  holoscan::TensorPoolConfig config;
  config.memory = holoscan::PoolMemory::kHost;
  config.block_bytes = 1 << 16;
  config.block_count = blocks;
  return holoscan::TensorPool::create(config);
}

void BM_ImportAndDestroy_Host4D(benchmark::State& state) {
  auto* producer = &host_producer();
  const auto start = holoscan_bench::thread_allocations();
  for (auto _ : state) {
    auto tensor = holoscan::make_tensor_from_dlpack_versioned(&producer->managed);
    benchmark::DoNotOptimize(tensor->data());
  }
  report_allocations(state, start);
}
BENCHMARK(BM_ImportAndDestroy_Host4D);

void BM_ExportAndDelete_Host4D(benchmark::State& state) {
  auto* producer = &host_producer();
  auto tensor = holoscan::make_tensor_from_dlpack_versioned(&producer->managed);
  export_and_delete(state, *tensor);
}
BENCHMARK(BM_ExportAndDelete_Host4D);

// The export of a tensor the library's producer made (a pool block), the other way tensors leave.
void BM_ExportAndDelete_PoolBlock(benchmark::State& state) {
  auto pool = host_pool(1);
  auto tensor = (*pool)->allocate({2, 3, 4, 5}, DLDataType{kDLFloat, 32, 1});
  export_and_delete(state, *tensor);
}
BENCHMARK(BM_ExportAndDelete_PoolBlock);

// The export of memory a producer wrapped with a release function (make_tensor, wrap_memory).
void BM_ExportAndDelete_WrappedMemory(benchmark::State& state) {
  static float values[2 * 3 * 4 * 5] = {};
  auto tensor = holoscan::make_tensor(
      {2, 3, 4, 5}, DLDataType{kDLFloat, 32, 1}, {}, holoscan::MemoryStorageType::kSystem, values,
      [](void*) -> holoscan::expected<void, holoscan::Error> { return {}; });
  export_and_delete(state, *tensor);
}
BENCHMARK(BM_ExportAndDelete_WrappedMemory);

void BM_ExportImportRoundTrip_Host4D(benchmark::State& state) {
  auto* producer = &host_producer();
  auto tensor = holoscan::make_tensor_from_dlpack_versioned(&producer->managed);
  const auto start = holoscan_bench::thread_allocations();
  for (auto _ : state) {
    auto again = holoscan::make_tensor_from_dlpack_versioned(*tensor->to_dlpack_versioned());
    benchmark::DoNotOptimize(again->data());
  }
  report_allocations(state, start);
}
BENCHMARK(BM_ExportImportRoundTrip_Host4D);

void BM_TensorCopyAndDestroy(benchmark::State& state) {
  // Shared by every thread of the multi-threaded run, so that its counts contend as in fan-out.
  static holoscan::Tensor tensor =
      *holoscan::make_tensor_from_dlpack_versioned(&host_producer().managed);
  const auto start = holoscan_bench::thread_allocations();
  for (auto _ : state) {
    holoscan::Tensor copy = tensor;
    benchmark::DoNotOptimize(copy.data());
  }
  report_allocations(state, start);
}
BENCHMARK(BM_TensorCopyAndDestroy);
HOLOSCAN_BENCH_SIXTEEN_THREADS(BM_TensorCopyAndDestroy);

void BM_PoolAllocateAndRelease_Host(benchmark::State& state) {
  auto pool = host_pool(4);
  const std::int64_t shape[2] = {64, 64};
  const auto start = holoscan_bench::thread_allocations();
  for (auto _ : state) {
    auto tensor = (*pool)->allocate(shape, 2, DLDataType{kDLFloat, 32, 1});
    benchmark::DoNotOptimize(tensor->data());
  }
  report_allocations(state, start);
}
BENCHMARK(BM_PoolAllocateAndRelease_Host);

}  // namespace
