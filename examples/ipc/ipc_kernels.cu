// The demo's kernels: small grids, so that many tensors are in flight on the GPU at once.
#include <cuda_runtime.h>

#include <algorithm>

#include "ipc/ipc_kernels.hpp"

namespace ipc_demo {
namespace {

constexpr unsigned kThreads = 256;

unsigned blocks_for(std::uint64_t count) {
  return static_cast<unsigned>(
      std::max<std::uint64_t>(1, std::min<std::uint64_t>((count + kThreads - 1) / kThreads, 64)));
}

__host__ __device__ std::uint32_t pattern(std::uint32_t sequence, std::uint64_t i) {
  std::uint32_t x = sequence * 0x9E3779B9u + static_cast<std::uint32_t>(i) * 0x85EBCA6Bu;
  x ^= x >> 16;
  x *= 0x7FEB352Du;
  x ^= x >> 15;
  return x;
}

__device__ std::uint64_t now_ns() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)::"memory");
  return t;
}

__global__ void fill(std::uint32_t* data, std::uint64_t count, std::uint32_t sequence,
                     std::uint64_t delay_ns) {
  if (delay_ns > 0) {
    const std::uint64_t start = now_ns();
    while (now_ns() - start < delay_ns) {
      __nanosleep(200);
    }
  }
  for (std::uint64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count;
       i += static_cast<std::uint64_t>(gridDim.x) * blockDim.x) {
    data[i] = pattern(sequence, i);
  }
}

__global__ void add_one(const std::uint32_t* in, std::uint32_t* out, std::uint64_t count) {
  for (std::uint64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count;
       i += static_cast<std::uint64_t>(gridDim.x) * blockDim.x) {
    out[i] = in[i] + 1;
  }
}

__global__ void check(const std::uint32_t* data, std::uint64_t count, std::uint32_t sequence,
                      std::uint32_t offset, unsigned long long* mismatches) {
  unsigned long long bad = 0;
  for (std::uint64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count;
       i += static_cast<std::uint64_t>(gridDim.x) * blockDim.x) {
    bad += data[i] != pattern(sequence, i) + offset ? 1 : 0;
  }
  if (bad != 0) {
    atomicAdd(mismatches, bad);
  }
}

}  // namespace

int launch_fill(std::uint32_t* data, std::uint64_t count, std::uint32_t sequence,
                std::uint64_t delay_us, cudaStream_t stream) {
  fill<<<blocks_for(count), kThreads, 0, stream>>>(data, count, sequence, delay_us * 1000);
  return static_cast<int>(cudaGetLastError());
}

int launch_add_one(const std::uint32_t* in, std::uint32_t* out, std::uint64_t count,
                   cudaStream_t stream) {
  add_one<<<blocks_for(count), kThreads, 0, stream>>>(in, out, count);
  return static_cast<int>(cudaGetLastError());
}

int launch_check(const std::uint32_t* data, std::uint64_t count, std::uint32_t sequence,
                 std::uint32_t offset, unsigned long long* mismatches, cudaStream_t stream) {
  check<<<blocks_for(count), kThreads, 0, stream>>>(data, count, sequence, offset, mismatches);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace ipc_demo
