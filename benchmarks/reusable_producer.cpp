#include "reusable_producer.hpp"

#include <cuda_runtime_api.h>

namespace holoscan_bench {

ReusableProducer& host_producer() {
  static std::array<float, ReusableProducer::kElements> data{};  // 96 KiB: not on the stack
  static ReusableProducer producer(data.data(), DLDevice{kDLCPU, 0});
  return producer;
}

ReusableProducer* device_producer() {
  // Allocated once and kept: the benchmarks only describe it, the GPU never touches it.
  static ReusableProducer* producer = []() -> ReusableProducer* {
    void* data = nullptr;
    if (cudaMalloc(&data, ReusableProducer::kElements * sizeof(float)) != cudaSuccess) {
      (void)cudaGetLastError();
      return nullptr;
    }
    return new ReusableProducer(data, DLDevice{kDLCUDA, 0});
  }();
  return producer;
}

}  // namespace holoscan_bench
