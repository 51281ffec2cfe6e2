// The library's main job, end to end: a producer hands tensors over DLPack; consumers on their own
// streams import them, order themselves after the producer, read and check the data, record their
// deallocation streams and let go; the producer's memory is released or reused only when safe.
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <holoscan/dlpack.hpp>
#include <holoscan/tensor.hpp>
#include <holoscan/tensor_pool.hpp>

namespace {

constexpr std::int64_t kElements = 1 << 20;  // 4 MiB of uint32 per hand-off
constexpr int kPoolBlocks = 4;
constexpr int kConsumers = 3;
constexpr int kIterations = 64;
constexpr std::int64_t kPoolBytes = 64 * 1024;

struct Tally {
  int checks_passed = 0;
  int checks_failed = 0;
  void check(bool ok, const char* what) {
    ok ? ++checks_passed : ++checks_failed;
    if (!ok) {
      std::printf("  CHECK FAILED: %s\n", what);
    }
  }
};

// What a foreign producer (PyTorch, CuPy, ...) hands over: a DLManagedTensorVersioned whose
// deleter frees the memory and counts how often it ran.
struct ProducedTensor {
  DLManagedTensorVersioned managed{};
  std::int64_t shape[1] = {kElements};
  void* memory = nullptr;
  bool on_device = false;
  std::atomic<int>* deleter_calls = nullptr;
};

DLManagedTensorVersioned* produce(void* memory, bool on_device, std::atomic<int>* deleter_calls) {
  auto* produced = new ProducedTensor();
  produced->memory = memory;
  produced->on_device = on_device;
  produced->deleter_calls = deleter_calls;
  DLManagedTensorVersioned& m = produced->managed;
  m.version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
  m.manager_ctx = produced;
  m.deleter = [](DLManagedTensorVersioned* self) {
    auto* owner = static_cast<ProducedTensor*>(self->manager_ctx);
    if (owner->on_device) {
      (void)cudaFree(owner->memory);
    } else {
      std::free(owner->memory);
    }
    owner->deleter_calls->fetch_add(1);
    delete owner;
  };
  m.dl_tensor.data = memory;
  m.dl_tensor.device = on_device ? DLDevice{kDLCUDA, 0} : DLDevice{kDLCPU, 0};
  m.dl_tensor.ndim = 1;
  m.dl_tensor.dtype = DLDataType{kDLUInt, 32, 1};
  m.dl_tensor.shape = produced->shape;
  return &m;
}

// Where consumer k's copy of tensor `iteration` lands in the results buffer.
unsigned char* slot_of(unsigned char* results, int iteration, int k) {
  return results +
         (static_cast<std::size_t>(iteration) * kConsumers + static_cast<std::size_t>(k)) *
             static_cast<std::size_t>(kPoolBytes);
}

bool all_bytes_equal(const void* data, std::size_t bytes, unsigned char value) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < bytes; ++i) {
    if (p[i] != value) {
      return false;
    }
  }
  return true;
}

#define DEMO_CUDA(call)                                                 \
  do {                                                                  \
    if (cudaError_t status_ = (call); status_ != cudaSuccess) {         \
      std::printf("%s failed: %s\n", #call, cudaGetErrorName(status_)); \
      std::exit(1);                                                     \
    }                                                                   \
  } while (0)

// Part 1: one hand-off of a foreign tensor, owned by DLManagedMemoryBufferVersioned.
void handoff_on_gpu(Tally& tally) {
  std::printf("[1] DLPack hand-off, producer stream -> consumer stream\n");
  cudaStream_t producer = nullptr;
  cudaStream_t consumer = nullptr;
  DEMO_CUDA(cudaStreamCreateWithFlags(&producer, cudaStreamNonBlocking));
  DEMO_CUDA(cudaStreamCreateWithFlags(&consumer, cudaStreamNonBlocking));
  const std::size_t bytes = kElements * sizeof(std::uint32_t);
  void* device = nullptr;
  void* host = nullptr;
  DEMO_CUDA(cudaMalloc(&device, bytes));
  DEMO_CUDA(cudaMallocHost(&host, bytes));

  // The producer's work is queued, not finished, when the tensor changes hands.
  std::atomic<int> deleter_calls{0};
  DEMO_CUDA(cudaMemsetAsync(device, 0x5A, bytes, producer));
  auto buffer = std::make_shared<holoscan::DLManagedMemoryBufferVersioned>(
      produce(device, /*on_device=*/true, &deleter_calls));
  tally.check(buffer->set_readiness_stream(producer), "set_readiness_stream(producer)");

  auto synced = buffer->synchronize_for_consumer(consumer);
  tally.check(synced.has_value(), "synchronize_for_consumer(consumer)");
  DEMO_CUDA(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, consumer));
  tally.check(buffer->set_deallocation_stream(consumer), "set_deallocation_stream(consumer)");
  buffer.reset();  // returns at once; the deleter waits for the consumer's copy
  std::printf("  released the owner while the consumer's copy was queued: deleter calls now %d\n",
              deleter_calls.load());

  DEMO_CUDA(cudaStreamSynchronize(consumer));
  tally.check(all_bytes_equal(host, bytes, 0x5A), "consumer read the producer's data");
  holoscan::flush_deferred_releases();
  tally.check(deleter_calls.load() == 1, "producer deleter ran exactly once");
  std::printf("  consumer read %zu bytes, all 0x5A; producer deleter calls: %d\n", bytes,
              deleter_calls.load());
  DEMO_CUDA(cudaFreeHost(host));
  DEMO_CUDA(cudaStreamDestroy(producer));
  DEMO_CUDA(cudaStreamDestroy(consumer));
}

void handoff_on_host(Tally& tally) {
  std::printf("[1] DLPack hand-off of host memory\n");
  const std::size_t bytes = kElements * sizeof(std::uint32_t);
  void* memory = std::malloc(bytes);
  std::memset(memory, 0x5A, bytes);
  std::atomic<int> deleter_calls{0};
  {
    auto tensor = holoscan::make_tensor_from_dlpack_versioned(
        produce(memory, /*on_device=*/false, &deleter_calls));
    tally.check(tensor.has_value(), "import of the host tensor");
    tally.check(!tensor->set_readiness_stream(nullptr), "stream hooks report no GPU (false)");
    tally.check(all_bytes_equal(tensor->data(), bytes, 0x5A), "consumer read the producer's data");
  }
  tally.check(deleter_calls.load() == 1, "producer deleter ran exactly once");
  std::printf("  consumer read %zu bytes, all 0x5A; producer deleter calls: %d\n", bytes,
              deleter_calls.load());
}

// Part 2: a producer fills pooled tensors; each is exported over DLPack to several consumers on
// their own streams, as a foreign framework would receive it.
void pipeline(Tally& tally, bool gpu) {
  std::printf("[2] pool pipeline: %d tensors, %d consumers each, %d pool blocks (%s memory)\n",
              kIterations, kConsumers, kPoolBlocks, gpu ? "device" : "host");
  holoscan::TensorPoolConfig config;
  config.memory = gpu ? holoscan::PoolMemory::kDevice : holoscan::PoolMemory::kHost;
  config.block_bytes = kPoolBytes;
  config.block_count = kPoolBlocks;
  auto pool = holoscan::TensorPool::create(config);
  if (!pool) {
    std::printf("  pool creation failed: %s\n", pool.error().message.c_str());
    ++tally.checks_failed;
    return;
  }
  cudaStream_t producer = nullptr;
  std::vector<cudaStream_t> consumers(kConsumers, nullptr);
  unsigned char* results = nullptr;  // one copy of every tensor per consumer, checked at the end
  const std::size_t result_bytes = std::size_t{kIterations} * kConsumers * kPoolBytes;
  if (gpu) {
    DEMO_CUDA(cudaStreamCreateWithFlags(&producer, cudaStreamNonBlocking));
    for (auto& stream : consumers) {
      DEMO_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    }
    DEMO_CUDA(cudaMallocHost(reinterpret_cast<void**>(&results), result_bytes));
  } else {
    results = static_cast<unsigned char*>(std::malloc(result_bytes));
  }

  const std::int64_t shape[1] = {kPoolBytes / 4};
  int waited = 0;
  for (int iteration = 0; iteration < kIterations; ++iteration) {
    auto tensor = (*pool)->allocate(shape, 1, DLDataType{kDLUInt, 32, 1});
    waited += !tensor ? 1 : 0;
    while (!tensor && tensor.error().code == holoscan::ErrorCode::kResourceExhausted) {
      // Every block is held or still read on the GPU: kResourceExhausted came at once, so the
      // producer decides how to wait; here it lets the consumers drain.
      std::this_thread::yield();
      tensor = (*pool)->allocate(shape, 1, DLDataType{kDLUInt, 32, 1});
    }
    if (!tensor) {
      std::printf("  allocate failed: %s\n", tensor.error().message.c_str());
      ++tally.checks_failed;
      break;
    }
    const auto pattern = static_cast<unsigned char>(iteration % 251 + 1);
    if (gpu) {
      DEMO_CUDA(cudaMemsetAsync(tensor->data(), pattern, kPoolBytes, producer));
      // The commit: readiness of this tensor's data.
      tally.check(tensor->set_readiness_stream(producer), "set_readiness_stream(producer)");
    } else {
      std::memset(tensor->data(), pattern, kPoolBytes);
    }
    // Published read-only: any number of consumers may then import it. (A writable tensor has one
    // DLPack export at a time, its writer's, as in Holoscan 5.0.) The pool gives the block's next
    // allocation writer authority again.
    tensor->dl_ctx()->tensor.flags |= DLPACK_FLAG_BITMASK_READ_ONLY;
    for (int k = 0; k < kConsumers; ++k) {
      // The producer's side of __dlpack__(stream=consumer): order the consumer, then export.
      if (gpu) {
        tally.check(tensor->synchronize_for_consumer_stream(consumers[k]).has_value(),
                    "synchronize_for_consumer_stream(consumer)");
      }
      auto exported = tensor->to_dlpack_versioned();
      auto received = exported
                          ? holoscan::make_tensor_from_dlpack_versioned(*exported)
                          : holoscan::expected<holoscan::Tensor>(tl::unexpect, exported.error());
      if (!received) {
        if (exported) {
          (*exported)->deleter(*exported);  // refused: the export is still ours to let go of
        }
        std::printf("  hand-off failed: %s\n", received.error().message.c_str());
        ++tally.checks_failed;
        continue;
      }
      unsigned char* slot = slot_of(results, iteration, k);
      if (gpu) {
        DEMO_CUDA(cudaMemcpyAsync(slot, received->data(), kPoolBytes, cudaMemcpyDeviceToHost,
                                  consumers[k]));
        tally.check(received->set_deallocation_stream(consumers[k]),
                    "set_deallocation_stream(consumer)");
      } else {
        std::memcpy(slot, received->data(), kPoolBytes);
      }
    }  // each consumer's import is released here; the pool block waits for its stream
  }
  if (gpu) {
    for (auto stream : consumers) {
      DEMO_CUDA(cudaStreamSynchronize(stream));
    }
  }
  holoscan::flush_deferred_releases();

  int verified = 0;
  for (int iteration = 0; iteration < kIterations; ++iteration) {
    for (int k = 0; k < kConsumers; ++k) {
      const unsigned char* slot = slot_of(results, iteration, k);
      verified +=
          all_bytes_equal(slot, kPoolBytes, static_cast<unsigned char>(iteration % 251 + 1));
    }
  }
  tally.check(verified == kIterations * kConsumers, "every consumer read its tensor's own data");
  tally.check((*pool)->available_blocks() == kPoolBlocks, "every block back in the pool");
  std::printf(
      "  tensors: %d, consumer reads verified: %d/%d, pool reuses: %llu, "
      "allocations that waited for a block: %d, blocks free at the end: %zu/%d\n",
      kIterations, verified, kIterations * kConsumers,
      static_cast<unsigned long long>((*pool)->reuse_count()), waited, (*pool)->available_blocks(),
      kPoolBlocks);
  if (gpu) {
    DEMO_CUDA(cudaFreeHost(results));
    for (auto stream : consumers) {
      DEMO_CUDA(cudaStreamDestroy(stream));
    }
    DEMO_CUDA(cudaStreamDestroy(producer));
  } else {
    std::free(results);
  }
}

}  // namespace

int main() {
  int devices = 0;
  const cudaError_t status = cudaGetDeviceCount(&devices);
  const bool gpu = status == cudaSuccess && devices > 0;
  std::printf("holoscan-dlpack demo\n");
  if (!gpu) {
    std::printf("GPU path skipped: cudaGetDeviceCount returned %s (%s); running the host path\n",
                cudaGetErrorName(status), cudaGetErrorString(status));
  }
  Tally tally;
  gpu ? handoff_on_gpu(tally) : handoff_on_host(tally);
  pipeline(tally, gpu);
  std::printf("checks passed: %d, failed: %d\n", tally.checks_passed, tally.checks_failed);
  return tally.checks_failed == 0 ? 0 : 1;
}
