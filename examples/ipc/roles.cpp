#include "ipc/roles.hpp"

#include <cuda_runtime_api.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "ipc/busy_time.hpp"
#include "ipc/finish_stamps.hpp"
#include "ipc/host_blocks.hpp"
#include "ipc/ipc_kernels.hpp"

namespace ipc_demo {
namespace {

using holoscan::ErrorCode;
using holoscan::Tensor;
namespace ipc = holoscan::ipc;

constexpr DLDataType kUInt32{kDLUInt, 32, 1};
constexpr auto kPatience = std::chrono::seconds(60);

bool report(const char* what, const holoscan::Error& error) {
  std::fprintf(stderr, "ipc demo (pid %d): %s: %s\n", static_cast<int>(::getpid()), what,
               error.message.c_str());
  return false;
}

int failed(int status, const char* what, const holoscan::Error& error) {
  report(what, error);
  return status;
}

// A free block, polling the exporter until a release brings one back (the polling is spin time).
bool allocate(holoscan::TensorPool& pool, ipc::Exporter& exporter, const RunShape& shape,
              Tensor& tensor) {
  const auto deadline = std::chrono::steady_clock::now() + kPatience;
  for (;;) {
    const auto attempt = std::chrono::steady_clock::now();
    auto allocated = pool.allocate({shape.elements}, kUInt32);
    if (allocated) {
      tensor = std::move(*allocated);
      return true;
    }
    if (allocated.error().code != ErrorCode::kResourceExhausted ||
        std::chrono::steady_clock::now() > deadline) {
      return report("allocate", allocated.error());
    }
    (void)exporter.poll();
    note_spin(std::chrono::steady_clock::now() - attempt);
  }
}

// Publishes, polling while the peer's socket is full.
bool publish(ipc::Exporter& exporter, ipc::PeerId peer, const Tensor& tensor) {
  const auto deadline = std::chrono::steady_clock::now() + kPatience;
  for (;;) {
    const auto attempt = std::chrono::steady_clock::now();
    auto published = exporter.publish(peer, tensor);
    if (published) {
      return true;
    }
    if (published.error().code != ErrorCode::kNotReady ||
        std::chrono::steady_clock::now() > deadline) {
      return report("publish", published.error());
    }
    (void)exporter.poll();
    note_spin(std::chrono::steady_clock::now() - attempt);
  }
}

// The next imported tensor, waiting up to a minute; false (after printing why) on failure. With
// `spin`, asks without waiting until one came (the asking is spin time), as the spinning floor
// does: a thread asleep in poll() is woken some microseconds after the data arrives.
bool receive(ipc::Importer& importer, Tensor& tensor, bool spin) {
  const auto waiting = std::chrono::steady_clock::now();
  const auto deadline = waiting + kPatience;
  auto received = importer.receive(spin ? 0 : 60000);
  while (spin && received && !*received && std::chrono::steady_clock::now() < deadline) {
    received = importer.receive(0);
  }
  if (spin) {
    note_spin(std::chrono::steady_clock::now() - waiting);
  }
  if (!received) {
    return report("receive", received.error());
  }
  if (!*received) {
    return report("receive", holoscan::Error{ErrorCode::kTimeout, "nothing came in 60 s", 0});
  }
  tensor = std::move(**received);
  return true;
}

ipc::ImporterOptions importer_options(const RunShape& shape) {
  ipc::ImporterOptions options;
  options.hello_timeout_ms = 60000;
  options.readiness = shape.readiness;
  return options;
}

cudaStream_t new_stream() {
  cudaStream_t stream = nullptr;
  return cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess ? stream
                                                                                  : nullptr;
}

}  // namespace

holoscan::expected<std::shared_ptr<holoscan::TensorPool>, holoscan::Error> make_pool(
    const RunShape& shape) {
  holoscan::TensorPoolConfig config;
  config.memory = holoscan::PoolMemory::kDevice;
  config.block_bytes = static_cast<std::size_t>(shape.elements) * sizeof(std::uint32_t);
  config.block_count = shape.blocks;
  config.memory_provider = holoscan::ipc::shareable_pool_memory();
  return holoscan::TensorPool::create(config);
}

bool produce(ipc::Exporter& exporter, const std::vector<ipc::PeerId>& peers,
             holoscan::TensorPool& pool, cudaStream_t stream, const RunShape& shape, long first,
             long end, bool one_at_a_time, StageTrace* trace) {
  const auto mark = [trace](long i, std::size_t stage) {
    if (trace != nullptr) {
      trace->mark(i, stage);
    }
  };
  for (long i = first; i < end; ++i) {
    mark(i, 0);
    Tensor tensor;
    if (!allocate(pool, exporter, shape, tensor)) {
      return false;
    }
    mark(i, 1);
    if (launch_fill(static_cast<std::uint32_t*>(tensor.data()),
                    static_cast<std::uint64_t>(shape.elements), static_cast<std::uint32_t>(i),
                    shape.delay_us, stream) != 0 ||
        !tensor.set_readiness_stream(stream)) {
      return report("produce", holoscan::Error{ErrorCode::kFailure, "fill kernel failed", 0});
    }
    mark(i, 2);
    const std::uint64_t released = exporter.stats().releases;
    for (ipc::PeerId peer : peers) {
      if (!publish(exporter, peer, tensor)) {
        return false;
      }
    }
    mark(i, 3);
    tensor = Tensor();
    (void)exporter.poll();
    if (one_at_a_time) {
      const auto deadline = std::chrono::steady_clock::now() + kPatience;
      const auto waiting = std::chrono::steady_clock::now();
      while (exporter.stats().releases < released + peers.size()) {
        if (std::chrono::steady_clock::now() > deadline) {
          return report("round trip", holoscan::Error{ErrorCode::kTimeout, "no Release", 0});
        }
        (void)exporter.poll();
      }
      note_spin(std::chrono::steady_clock::now() - waiting);
      mark(i, 4);
    }
  }
  return true;
}

bool drain(ipc::Exporter& exporter) {
  const auto deadline = std::chrono::steady_clock::now() + kPatience;
  while (exporter.held() != 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      return false;
    }
    (void)exporter.poll();
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  return true;
}

int consume(int channel_fd, const RunShape& shape, std::uint32_t offset, int done_fd) {
  count_host_blocks();
  auto channel = ipc::Channel::adopt(ipc::UniqueFd(channel_fd));
  if (!channel) {
    return failed(2, "channel", channel.error());
  }
  auto importer = ipc::Importer::create(std::move(*channel), importer_options(shape));
  if (!importer) {
    return failed(2, "importer", importer.error());
  }
  cudaStream_t stream = nullptr;
  unsigned long long* mismatches = nullptr;
  std::uint64_t blocks_before = 0;
  StageTrace trace(shape.trace.empty() ? std::string() : shape.trace + ".consumer", shape.count);
  BusyMeter busy;
  for (long i = 0; i < shape.count; ++i) {
    if (i == kWarmUpTensors) {
      busy.start();
    }
    Tensor tensor;
    if (!receive(*importer, tensor, shape.spin)) {
      return 3;
    }
    trace.mark(i, 0);
    if (stream == nullptr) {
      // Set up once the first import shows the device, before the hot path is timed.
      if (cudaSetDevice(tensor.device().device_id) != cudaSuccess ||
          (stream = new_stream()) == nullptr ||
          cudaMalloc(reinterpret_cast<void**>(&mismatches), sizeof(*mismatches)) != cudaSuccess ||
          // On the checks' own stream: a non-blocking stream is not ordered after the legacy
          // default stream's memset, which could then clear counts the checks had made.
          cudaMemsetAsync(mismatches, 0, sizeof(*mismatches), stream) != cudaSuccess) {
        return failed(4, "setup", holoscan::Error{ErrorCode::kFailure, "no stream", 0});
      }
      blocks_before = host_blocks();
    }
    // What the producer published, whole: a smaller or differently laid out import would check
    // fewer values and still pass.
    if (tensor.size() != shape.elements || tensor.dtype().code != kDLUInt ||
        tensor.dtype().bits != 32 || tensor.dtype().lanes != 1 || !tensor.is_contiguous()) {
      return failed(5, "import",
                    holoscan::Error{ErrorCode::kFailure, "not the tensor published", 0});
    }
    if (auto ordered = tensor.synchronize_for_consumer_stream(stream); !ordered) {
      return failed(5, "synchronize_for_consumer", ordered.error());
    }
    if (launch_check(tensor.data_as<std::uint32_t>(), static_cast<std::uint64_t>(tensor.size()),
                     static_cast<std::uint32_t>(i), offset, mismatches, stream) != 0 ||
        !tensor.set_deallocation_stream(stream)) {
      return failed(6, "check", holoscan::Error{ErrorCode::kFailure, "check kernel failed", 0});
    }
    trace.mark(i, 1);
    tensor = Tensor();  // the Release goes out now
    trace.mark(i, 2);
  }
  const std::uint64_t blocks = host_blocks() - blocks_before;
  busy.report(stdout, "consumer", shape.count - kWarmUpTensors);
  (void)trace.write();
  unsigned long long wrong = 0;
  // The run is over: this wait is for the report, not part of the hot path.
  if (cudaStreamSynchronize(stream) != cudaSuccess ||
      cudaMemcpy(&wrong, mismatches, sizeof(wrong), cudaMemcpyDeviceToHost) != cudaSuccess) {
    return failed(7, "results", holoscan::Error{ErrorCode::kFailure, "cannot read", 0});
  }
  FinishStamps::write(done_fd);
  std::printf(
      "consumer %d: %ld tensors checked on the GPU, %llu mismatching elements, %llu host "
      "blocks on the hot path\n",
      static_cast<int>(::getpid()), shape.count, wrong, static_cast<unsigned long long>(blocks));
  (void)cudaFree(mismatches);
  return wrong == 0 && blocks == 0 ? 0 : 1;
}

int relay(int in_fd, int out_fd, const RunShape& shape) {
  count_host_blocks();
  auto in = ipc::Channel::adopt(ipc::UniqueFd(in_fd));
  auto out = ipc::Channel::adopt(ipc::UniqueFd(out_fd));
  if (!in || !out) {
    return failed(2, "channels", !in ? in.error() : out.error());
  }
  auto importer = ipc::Importer::create(std::move(*in), importer_options(shape));
  auto exporter = ipc::Exporter::create();
  if (!importer || !exporter) {
    return failed(2, "endpoints", !importer ? importer.error() : exporter.error());
  }
  auto sink = exporter->add_peer(std::move(*out), 60000);
  auto pool = make_pool(shape);
  cudaStream_t stream = new_stream();
  if (!sink || !pool || stream == nullptr) {
    return failed(2, "setup", !sink ? sink.error() : !pool ? pool.error() : holoscan::Error{});
  }
  const std::uint64_t blocks_before = host_blocks();
  StageTrace trace(shape.trace.empty() ? std::string() : shape.trace + ".relay", shape.count);
  BusyMeter busy;
  for (long i = 0; i < shape.count; ++i) {
    if (i == kWarmUpTensors) {
      busy.start();
    }
    trace.mark(i, 0);
    Tensor in_tensor;
    Tensor out_tensor;
    if (!receive(*importer, in_tensor, shape.spin)) {
      return 3;
    }
    trace.mark(i, 1);
    if (!allocate(**pool, *exporter, shape, out_tensor)) {
      return 4;
    }
    trace.mark(i, 2);
    if (!in_tensor.synchronize_for_consumer_stream(stream) ||
        launch_add_one(in_tensor.data_as<std::uint32_t>(),
                       static_cast<std::uint32_t*>(out_tensor.data()),
                       static_cast<std::uint64_t>(shape.elements), stream) != 0 ||
        !in_tensor.set_deallocation_stream(stream) || !out_tensor.set_readiness_stream(stream)) {
      return failed(5, "relay", holoscan::Error{ErrorCode::kFailure, "add_one failed", 0});
    }
    trace.mark(i, 3);
    if (!publish(*exporter, *sink, out_tensor)) {
      return 6;
    }
    trace.mark(i, 4);
    in_tensor = Tensor();  // its Release goes out now
    out_tensor = Tensor();
    trace.mark(i, 5);
  }
  busy.report(stdout, "relay", shape.count - kWarmUpTensors);
  (void)trace.write();
  const bool drained = drain(*exporter);
  const std::uint64_t blocks = host_blocks() - blocks_before;
  // One pool allocation each way: one fd in, one out, whatever the count (since protocol version 3).
  std::printf("relay %d: %ld tensors relayed, %llu host blocks on the hot path, fds %llu in and "
              "%llu out\n",
              static_cast<int>(::getpid()), shape.count, static_cast<unsigned long long>(blocks),
              static_cast<unsigned long long>(importer->stats().fds_received),
              static_cast<unsigned long long>(exporter->stats().fds_sent));
  return drained && blocks == 0 ? 0 : 1;
}

}  // namespace ipc_demo
