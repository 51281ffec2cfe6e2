// The landing probe's kernels: a kernel that does nothing, and a copy that reads host memory the
// GPU maps (pinned, UVA) and writes device memory, a landing made by a kernel instead of the copy
// engine.
#include "landing_kernels.hpp"

namespace {

__global__ void do_nothing() {}

__global__ void copy_words(std::uint32_t* to, const std::uint32_t* from, std::size_t words) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < words;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    to[i] = from[i];
  }
}

}  // namespace

cudaError_t launch_nothing(cudaStream_t stream) {
  do_nothing<<<1, 1, 0, stream>>>();
  return cudaGetLastError();
}

cudaError_t launch_copy_words(void* to, const void* from, std::size_t bytes, cudaStream_t stream) {
  const std::size_t words = bytes / sizeof(std::uint32_t);
  copy_words<<<static_cast<unsigned>((words + 255) / 256), 256, 0, stream>>>(
      static_cast<std::uint32_t*>(to), static_cast<const std::uint32_t*>(from), words);
  return cudaGetLastError();
}
