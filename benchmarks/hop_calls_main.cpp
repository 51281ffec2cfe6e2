// holoscan_dlpack_hop_calls: the CUDA calls of a tensor's hop on a real GPU, counted at the
// library's CUDA table (the same loop as the CPU test HopCalls, which runs it on the fake runtime),
// on the caller's thread and on the release thread. Usage: holoscan_dlpack_hop_calls [hops]
#include <cuda_runtime_api.h>

#include <array>
#include <cstdio>
#include <cstdlib>

#include <holoscan/event_pool.hpp>

#include "hop_calls.hpp"
#include "reusable_producer.hpp"

int main(int argc, char** argv) {
  const int hops = argc > 1 ? std::atoi(argv[1]) : 20000;
  holoscan_bench::ReusableProducer* producer = holoscan_bench::device_producer();
  if (producer == nullptr) {
    std::printf("hop calls: no CUDA device here; nothing to count\n");
    return 0;
  }
  cudaStream_t stream = nullptr;
  std::array<cudaStream_t, holoscan_bench::kHopConsumers> consumers{};
  if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
    return 1;
  }
  for (auto& consumer : consumers) {
    if (cudaStreamCreateWithFlags(&consumer, cudaStreamNonBlocking) != cudaSuccess) {
      return 1;
    }
  }
  (void)holoscan::reserve_stream_events(0, 256);
  (void)holoscan_bench::count_library_cuda_calls();
  const auto calls = holoscan_bench::count_hop_calls([producer] { return &producer->managed; },
                                                     stream, consumers, hops, hops / 10);
  holoscan_bench::print_calls_per_hop(stdout, "hop, 3 consumers, real runtime", calls);
  std::printf("RESULT hop_calls caller=%.3f release=%.3f hops=%d\n",
              holoscan_bench::CallsPerHop::total(calls.caller),
              holoscan_bench::CallsPerHop::total(calls.release), hops);
  (void)cudaDeviceSynchronize();
  return 0;
}
