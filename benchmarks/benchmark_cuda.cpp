#include "benchmark_cuda.hpp"

#include <string>

namespace holoscan_bench {

bool require_gpu(benchmark::State& state) {
  int devices = 0;
  const cudaError_t status = cudaGetDeviceCount(&devices);
  if (status == cudaSuccess && devices > 0) {
    return true;
  }
  (void)cudaGetLastError();
  const std::string reason = std::string("no CUDA device: ") + cudaGetErrorName(status);
  state.SkipWithError(reason.c_str());
  return false;
}

StreamPair::StreamPair() {
  (void)cudaStreamCreateWithFlags(&producer, cudaStreamNonBlocking);
  (void)cudaStreamCreateWithFlags(&consumer, cudaStreamNonBlocking);
}

StreamPair::~StreamPair() {
  (void)cudaStreamSynchronize(producer);
  (void)cudaStreamSynchronize(consumer);
  (void)cudaStreamDestroy(producer);
  (void)cudaStreamDestroy(consumer);
}

}  // namespace holoscan_bench
