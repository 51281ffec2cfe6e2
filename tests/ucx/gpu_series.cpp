#include "ucx/gpu_series.hpp"

#include <cuda_runtime.h>

#include <vector>

#include "gpu/kernels.hpp"

namespace holoscan::test {
namespace {

constexpr DLDataType kUint32{kDLUInt, 32, 1};
constexpr int kPatienceMs = 30000;

std::shared_ptr<TensorPool> device_pool(std::int64_t elements) {
  auto pool = TensorPool::create({PoolMemory::kDevice, 0,
                                  static_cast<std::size_t>(elements) * sizeof(std::uint32_t),
                                  kDeviceSeriesBlocks});
  return pool ? *pool : nullptr;
}

// A non-blocking stream, synchronized and destroyed with the scope.
class Stream {
 public:
  Stream() { (void)cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking); }
  ~Stream() {
    (void)cudaStreamSynchronize(stream_);
    (void)cudaStreamDestroy(stream_);
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const noexcept { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

void collect(ucx::Worker& worker, DeviceSendReport& report) {
  (void)worker.progress();
  while (auto result = worker.next_send_result()) {
    if (result->outcome) {
      ++report.delivered;
    } else if (++report.failed == 1) {
      report.error = to_string(result->outcome.error());
    }
  }
}

}  // namespace

ucx::WorkerConfig device_receiving_config(std::int64_t elements) {
  ucx::WorkerConfig config;
  config.receive_pool = device_pool(elements);
  return config;
}

DeviceSendReport send_device_series(ucx::Worker& worker, ucx::PeerId peer, std::uint64_t count,
                                    std::int64_t elements, std::uint64_t delay_us) {
  DeviceSendReport report;
  auto pool = device_pool(elements);
  Stream producer;
  if (pool == nullptr || producer.get() == nullptr) {
    report.error = "no device pool or stream";
    return report;
  }
  for (std::uint64_t k = 0; k < count; ++k) {
    auto tensor = pool->allocate({elements}, kUint32);
    for (; !tensor && tensor.error().code == ErrorCode::kResourceExhausted;
         tensor = pool->allocate({elements}, kUint32)) {
      collect(worker, report);  // a block comes back once UCX has read it
    }
    if (!tensor) {
      report.error = to_string(tensor.error());
      return report;
    }
    auto* data = static_cast<std::uint32_t*>(tensor->data());
    const auto seed = static_cast<std::uint32_t>(k + 1);
    if (launch_slow_fill(data, static_cast<std::uint64_t>(elements), seed, delay_us,
                         producer.get()) != 0 ||
        !tensor->set_readiness_stream(producer.get())) {
      report.error = "the producer could not be launched";
      return report;
    }
    auto sent = worker.send(peer, *tensor);  // at once: the producer is still spinning
    for (; !sent && sent.error().code == ErrorCode::kBackpressured;
         sent = worker.send(peer, *tensor)) {
      collect(worker, report);
    }
    if (!sent) {
      report.error = to_string(sent.error());
      return report;
    }
  }
  while (report.delivered + report.failed < count) {
    collect(worker, report);
  }
  return report;
}

DeviceReceiveReport receive_device_series(ucx::Worker& worker, std::uint64_t count,
                                          std::int64_t elements) {
  DeviceReceiveReport report;
  Stream consumer;
  CheckResult* results = nullptr;
  if (cudaMalloc(&results, count * sizeof(CheckResult)) != cudaSuccess ||
      cudaMemset(results, 0, count * sizeof(CheckResult)) != cudaSuccess) {
    report.error = "no device memory for the results";
    return report;
  }
  for (std::uint64_t k = 0; k < count; ++k) {
    auto received = worker.receive(kPatienceMs);
    if (!received || !*received) {
      report.error = received ? "tensor " + std::to_string(k + 1) + " did not come"
                              : to_string(received.error());
      break;
    }
    Tensor& tensor = (*received)->tensor;
    // Launched at once, with no wait: receive() promised the data is in place. Reading twice, a
    // delay apart, also catches a block that UCX fills again while the check still runs.
    if (launch_check(static_cast<const std::uint32_t*>(tensor.data()),
                     static_cast<std::uint64_t>(elements),
                     static_cast<std::uint32_t>((*received)->sequence), 200, &results[k],
                     consumer.get()) != 0 ||
        !tensor.set_deallocation_stream(consumer.get())) {
      report.error = "the check could not be launched";
      break;
    }
    ++report.received;
  }
  std::vector<CheckResult> host(count);
  (void)cudaStreamSynchronize(consumer.get());
  (void)cudaMemcpy(host.data(), results, count * sizeof(CheckResult), cudaMemcpyDeviceToHost);
  (void)cudaFree(results);
  for (std::uint64_t k = 0; k < report.received; ++k) {
    report.mismatches += host[k].mismatches;
    report.wrong_sums += host[k].checksum == expected_checksum(static_cast<std::uint32_t>(k + 1),
                                                               static_cast<std::uint64_t>(elements))
                             ? 0
                             : 1;
  }
  return report;
}

}  // namespace holoscan::test
