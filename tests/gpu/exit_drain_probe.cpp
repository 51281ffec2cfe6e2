// A process that returns from main while a release is still pending on the GPU: the library's
// exit handler must wait for the consumer and run the deleter. CTest reads the last line.
#include <cuda_runtime.h>

#include <cstdio>
#include <holoscan/dlpack.hpp>
#include <memory>

#include "gpu/kernels.hpp"

namespace {

constexpr int kSkip = 77;  // CTest's SKIP_RETURN_CODE for this test
cudaStream_t consumer = nullptr;

void on_delete(DLManagedTensorVersioned* self) {
  // The consumer must have finished by the time the memory is given back.
  const cudaError_t state = cudaStreamQuery(consumer);
  std::printf("deleter ran, consumer %s\n", state == cudaSuccess ? "finished" : "STILL RUNNING");
  std::fflush(stdout);
  (void)cudaFree(self->dl_tensor.data);
  delete self;
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("skipped: no CUDA device\n");
    return kSkip;
  }
  if (holoscan::test::load_all_kernels() != 0 ||
      cudaStreamCreateWithFlags(&consumer, cudaStreamNonBlocking) != cudaSuccess) {
    return 1;
  }
  auto* managed = new DLManagedTensorVersioned{};
  managed->version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
  managed->deleter = on_delete;
  managed->dl_tensor.device = {kDLCUDA, 0};
  managed->dl_tensor.dtype = {kDLUInt, 8, 1};
  if (cudaMalloc(&managed->dl_tensor.data, 256) != cudaSuccess) {
    return 1;
  }
  {
    holoscan::DLManagedMemoryBufferVersioned buffer(managed);
    if (holoscan::test::launch_spin(200'000, consumer) != 0 ||
        !buffer.set_deallocation_stream(consumer)) {
      return 1;
    }
  }
  std::printf("main returns with %zu release(s) pending\n", holoscan::pending_deferred_releases());
  return 0;  // the stream is left alive on purpose: the deleter queries it during exit
}
