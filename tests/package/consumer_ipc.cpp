// Compiles against the cross-process library's public headers without CUDA's, then sends a Release
// over a channel pair and checks that host memory is refused for export, naming why (no GPU needed).
#include <holoscan/ipc.hpp>
#include <holoscan/tensor_pool.hpp>

#if defined(__CUDA_RUNTIME_API_H__) || defined(__DRIVER_TYPES_H__)
#error "a public header pulled in a CUDA header"
#endif

#include <cstdio>
#include <string>
#include <variant>

int main() {
  namespace ipc = holoscan::ipc;
  auto channels = ipc::Channel::pair();
  if (!channels) {
    std::printf("consumer_ipc: %s\n", channels.error().message.c_str());
    return 1;
  }
  ipc::Release release;
  release.export_id = 42;
  auto sent = channels->first.send(release, 1000);
  auto received = channels->second.receive(1000);
  if (!sent || !received || !*received || !std::holds_alternative<ipc::Release>(**received) ||
      std::get<ipc::Release>(**received).export_id != 42) {
    std::printf("consumer_ipc: the Release did not arrive\n");
    return 2;
  }
  auto pool = holoscan::TensorPool::create({holoscan::PoolMemory::kHost, 0, 256, 1});
  if (!pool) {
    return 3;
  }
  auto tensor = (*pool)->allocate({4}, DLDataType{kDLFloat, 32, 1});
  if (!tensor) {
    return 4;
  }
  auto exported = ipc::export_tensor(*tensor, 1);
  if (exported || exported.error().message.find("host memory") == std::string::npos) {
    std::printf("consumer_ipc: host memory was not refused as it should be\n");
    return 5;
  }
  std::printf("consumer_ipc: a Release crossed the channel; host memory refused (%s)\n",
              exported.error().message.c_str());
  return 0;
}
