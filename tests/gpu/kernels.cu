// The test kernels: a slow producer, a checking consumer, a stream-busy spinner and a fill.
#include <cuda_runtime.h>

#include <algorithm>

#include "gpu/kernels.hpp"

namespace holoscan::test {
namespace {

constexpr unsigned kThreads = 256;
// Few blocks, so that spinning kernels leave most of the GPU free for the other streams' work.
constexpr std::uint64_t kMaxBlocks = 32;

unsigned blocks_for(std::uint64_t count) {
  const std::uint64_t wanted = (count + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::max<std::uint64_t>(1, std::min(wanted, kMaxBlocks)));
}

// %globaltimer is wall-clock nanoseconds, so delays do not depend on the SM clock.
__device__ std::uint64_t global_ns() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)::"memory");
  return t;
}

__device__ void spin_for(std::uint64_t ns) {
  const std::uint64_t start = global_ns();
  while (global_ns() - start < ns) {
    __nanosleep(200);
  }
}

__device__ std::uint64_t first_index() {
  return static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}

__device__ std::uint64_t grid_stride() {
  return static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
}

__global__ void slow_fill_kernel(std::uint32_t* data, std::uint64_t count, std::uint32_t seed,
                                 std::uint64_t delay_ns) {
  spin_for(delay_ns);
  for (std::uint64_t i = first_index(); i < count; i += grid_stride()) {
    data[i] = pattern_value(seed, i);
  }
}

__global__ void check_kernel(const std::uint32_t* data, std::uint64_t count, std::uint32_t seed,
                             std::uint64_t delay_ns, CheckResult* result) {
  unsigned int bad = 0;
  if (delay_ns > 0) {
    for (std::uint64_t i = first_index(); i < count; i += grid_stride()) {
      bad += __ldcv(data + i) != pattern_value(seed, i) ? 1u : 0u;
    }
    spin_for(delay_ns);
  }
  unsigned long long sum = 0;
  for (std::uint64_t i = first_index(); i < count; i += grid_stride()) {
    const std::uint32_t v = __ldcv(data + i);  // .cv: never an L1 copy from the first pass
    bad += v != pattern_value(seed, i) ? 1u : 0u;
    sum += v;
  }
  if (bad != 0) {
    atomicAdd(&result->mismatches, bad);
  }
  atomicAdd(&result->checksum, sum);
}

__global__ void spin_kernel(std::uint64_t duration_ns) { spin_for(duration_ns); }

__global__ void fill_kernel(std::uint32_t* data, std::uint64_t count, std::uint32_t value) {
  for (std::uint64_t i = first_index(); i < count; i += grid_stride()) {
    data[i] = value;
  }
}

int launched() { return static_cast<int>(cudaGetLastError()); }

// Loading a module lazily on first launch may wait for the whole device; tests that time one
// stream against another must not meet that wait in the middle.
int load_all_kernels_on_current_device() {
  cudaFuncAttributes attributes{};
  for (const void* kernel :
       {reinterpret_cast<const void*>(&slow_fill_kernel),
        reinterpret_cast<const void*>(&check_kernel), reinterpret_cast<const void*>(&spin_kernel),
        reinterpret_cast<const void*>(&fill_kernel)}) {
    if (cudaError_t status = cudaFuncGetAttributes(&attributes, kernel); status != cudaSuccess) {
      return static_cast<int>(status);
    }
  }
  return 0;
}

}  // namespace

int launch_slow_fill(std::uint32_t* data, std::uint64_t count, std::uint32_t seed,
                     std::uint64_t delay_us, cudaStream_t stream) {
  slow_fill_kernel<<<blocks_for(count), kThreads, 0, stream>>>(data, count, seed, delay_us * 1000);
  return launched();
}

int launch_check(const std::uint32_t* data, std::uint64_t count, std::uint32_t seed,
                 std::uint64_t delay_us, CheckResult* result, cudaStream_t stream) {
  check_kernel<<<blocks_for(count), kThreads, 0, stream>>>(data, count, seed, delay_us * 1000,
                                                           result);
  return launched();
}

int launch_spin(std::uint64_t duration_us, cudaStream_t stream) {
  spin_kernel<<<1, 32, 0, stream>>>(duration_us * 1000);
  return launched();
}

int launch_fill(std::uint32_t* data, std::uint64_t count, std::uint32_t value,
                cudaStream_t stream) {
  fill_kernel<<<blocks_for(count), kThreads, 0, stream>>>(data, count, value);
  return launched();
}

int load_all_kernels() {
  int devices = 0;
  int current = 0;
  if (cudaError_t status = cudaGetDeviceCount(&devices); status != cudaSuccess) {
    return static_cast<int>(status);
  }
  if (cudaError_t status = cudaGetDevice(&current); status != cudaSuccess) {
    return static_cast<int>(status);
  }
  int result = 0;
  for (int device = 0; device < devices && result == 0; ++device) {
    result = static_cast<int>(cudaSetDevice(device));
    if (result == 0) {
      result = load_all_kernels_on_current_device();
    }
  }
  const int restored = static_cast<int>(cudaSetDevice(current));
  return result != 0 ? result : restored;
}

}  // namespace holoscan::test
