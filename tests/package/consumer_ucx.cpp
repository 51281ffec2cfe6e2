// Compiles against the UCX library's public headers without UCX's or CUDA's headers, then sends
// one host tensor to itself over UCX and checks what arrives.
#include <holoscan/tensor_pool.hpp>
#include <holoscan/ucx.hpp>

#if defined(UCP_API_H_) || defined(__CUDA_RUNTIME_API_H__)
#error "a public header pulled in a UCX or CUDA header"
#endif

#include <cstdio>

int main() {
  namespace ucx = holoscan::ucx;
  auto worker = ucx::Worker::create();
  auto port = worker ? worker->listen("127.0.0.1") : holoscan::expected<std::uint16_t>();
  auto peer = port ? worker->connect("127.0.0.1", *port) : holoscan::expected<ucx::PeerId>();
  auto pool = holoscan::TensorPool::create({holoscan::PoolMemory::kHost, 0, 1024, 1});
  if (!worker || !port || !peer || !pool) {
    std::printf("consumer_ucx: setting up failed\n");
    return 1;
  }
  auto tensor = (*pool)->allocate({16}, DLDataType{kDLInt, 32, 1});
  for (int i = 0; i < 16; ++i) {
    static_cast<int*>(tensor->data())[i] = 3 * i + 1;
  }
  auto sent = worker->send(*peer, *tensor);
  auto received = worker->receive(10000);
  if (!sent || !received || !*received) {
    std::printf("consumer_ucx: the tensor did not arrive\n");
    return 2;
  }
  const int* values = (*received)->tensor.data_as<int>();
  int wrong = 0;
  for (int i = 0; i < 16; ++i) {
    wrong += values[i] != 3 * i + 1 ? 1 : 0;
  }
  std::printf("consumer_ucx: 16 values over UCX, %d wrong\n", wrong);
  return wrong == 0 ? 0 : 3;
}
