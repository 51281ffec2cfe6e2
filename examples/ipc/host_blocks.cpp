#include "ipc/host_blocks.hpp"

#include <atomic>

#include "cuda/cuda_api.hpp"
#include "ipc/cuda/cuda_ipc_api.hpp"

namespace ipc_demo {
namespace {

std::atomic<std::uint64_t> blocks{0};

cudaError_t stream_synchronize(cudaStream_t stream) {
  blocks.fetch_add(1, std::memory_order_relaxed);
  return holoscan::detail::real_cuda_api().stream_synchronize(stream);
}

cudaError_t event_synchronize(cudaEvent_t event) {
  blocks.fetch_add(1, std::memory_order_relaxed);
  return holoscan::detail::real_cuda_api().event_synchronize(event);
}

cudaError_t ipc_event_synchronize(cudaEvent_t event) {
  blocks.fetch_add(1, std::memory_order_relaxed);
  return holoscan::detail::real_cuda_ipc_api().event_synchronize(event);
}

}  // namespace

void count_host_blocks() noexcept {
  static const holoscan::detail::CudaApi runtime = [] {
    holoscan::detail::CudaApi table = holoscan::detail::real_cuda_api();
    table.stream_synchronize = &stream_synchronize;
    table.event_synchronize = &event_synchronize;
    return table;
  }();
  static const holoscan::detail::CudaIpcApi ipc = [] {
    holoscan::detail::CudaIpcApi table = holoscan::detail::real_cuda_ipc_api();
    table.event_synchronize = &ipc_event_synchronize;
    return table;
  }();
  holoscan::detail::install_cuda_api(&runtime);
  holoscan::detail::install_cuda_ipc_api(&ipc);
}

std::uint64_t host_blocks() noexcept { return blocks.load(std::memory_order_relaxed); }

}  // namespace ipc_demo
