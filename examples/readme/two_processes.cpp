// The README's cross-process example: a producer process publishes tensors of a shareable pool to
// a consumer process over a Unix socket. tests/cpu/readme_examples_test.cpp runs both functions,
// in two processes, on the fake CUDA runtimes. The README shows the parts between the markers,
// verbatim: change both together (the test readme.examples_are_shown_verbatim checks it).
#include "readme/two_processes.hpp"

#include <utility>

#include <holoscan/ipc.hpp>
#include <holoscan/tensor_pool.hpp>

// readme-begin
namespace ipc = holoscan::ipc;  // link holoscan::dlpack_ipc
// .value() throws on failure; handle each expected instead in real code.

// Process 1: publishes `count` tensors to the consumer that connects to `path`.
void produce(const std::string& path, int count, cudaStream_t stream) {
  auto listener = ipc::Listener::listen(path).value();
  auto exporter = ipc::Exporter::create().value();
  auto peer = exporter.add_peer(*listener.accept().value()).value();  // Hello, both ways
  auto pool = holoscan::TensorPool::create({holoscan::PoolMemory::kDevice, /*device=*/0, 1 << 20,
                                            /*block_count=*/4, ipc::shareable_pool_memory()})
                  .value();  // VMM memory, shared with the consumer as one fd per allocation
  for (int i = 0; i < count; exporter.poll().value()) {  // poll: take back released blocks
    auto block = pool->allocate({1024}, DLDataType{kDLFloat, 32, 1}, stream);
    if (!block && block.error().code == holoscan::ErrorCode::kResourceExhausted) {
      continue;  // the consumer still holds every block
    }
    holoscan::Tensor tensor = std::move(block).value();
    launch_fill(static_cast<float*>(tensor.data()), tensor.size(), float(i), stream);
    tensor.set_readiness_stream(stream);     // the consumer gets it once the fill is done
    exporter.publish(peer, tensor).value();  // never waits; 4 blocks: the socket never fills
    ++i;
  }
  while (exporter.held() > 0) {  // every export given back (or the consumer's process gone)
    exporter.poll().value();
  }
}
// readme-end

// readme-begin
// Process 2: imports the tensors (read-only, each allocation mapped once) and reads them.
void consume(const std::string& path, int count, cudaStream_t stream) {
  auto importer = ipc::Importer::create(ipc::Channel::connect(path).value()).value();
  for (int i = 0; i < count; ++i) {
    holoscan::Tensor tensor = importer.receive(/*timeout_ms=*/5000).value().value();
    if (auto ready = tensor.synchronize_for_consumer_stream(stream); !ready) {  // met already
      throw holoscan::RuntimeError(ready.error());
    }
    launch_read(tensor.data_as<float>(), tensor.size(), stream);
    tensor.set_deallocation_stream(stream);  // the producer reuses the block after this kernel
  }  // each tensor dropped: its Release goes back, ordered after `stream` on the GPU
}
// readme-end
