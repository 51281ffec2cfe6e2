// holoscan_dlpack_release_backlog: how far the release thread falls behind threads that drop
// owners as fast as they can. Each of N threads hops tensors for S seconds (import, readiness,
// three consumers wait and record, drop: BM_Hop3's loop) on streams of its own, first with the
// backlog limit at its default, then with none; a sampler notes the most releases pending. Real
// CUDA when a device answers, else (or with --zero-cost) the zero-cost CUDA table, which leaves
// only the library's own work. Usage: holoscan_dlpack_release_backlog [threads] [seconds]
// [--zero-cost]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <thread>
#include <vector>

#include <holoscan/deferred_release.hpp>
#include <holoscan/event_pool.hpp>
#include <holoscan/tensor.hpp>

#include "reusable_producer.hpp"
#include "zero_cost_cuda.hpp"

namespace {

constexpr int kConsumers = 3;
constexpr int kStreamsPerThread = 1 + kConsumers;
constexpr int kZeroCostStreams = 64;  // the zero-cost table's stream handles

/** @brief One thread's streams: the producer's, then the consumers'. */
using ThreadStreams = std::array<cudaStream_t, kStreamsPerThread>;

/** @brief What one run of the threads did. */
struct RunResult {
  std::size_t most_pending = 0;
  std::size_t events_made = 0;
  double hops_per_second = 0;
};

// One thread's loop until `stop`: BM_Hop3_Library's hop.
long hop_until(std::atomic<bool>& stop, DLManagedTensorVersioned* managed,
               const ThreadStreams& streams) {
  long hops = 0;
  while (!stop.load(std::memory_order_relaxed)) {
    auto tensor = holoscan::make_tensor_from_dlpack_versioned(managed);
    if (!tensor) {
      std::fprintf(stderr, "import failed: %s\n", tensor.error().message.c_str());
      return hops;
    }
    (void)tensor->set_readiness_stream(streams[0]);
    for (int c = 1; c <= kConsumers; ++c) {
      (void)tensor->synchronize_for_consumer_stream(streams[static_cast<std::size_t>(c)]);
      (void)tensor->set_deallocation_stream(streams[static_cast<std::size_t>(c)]);
    }
    ++hops;
  }
  return hops;
}

RunResult run(std::size_t limit, int seconds,
              std::deque<holoscan_bench::ReusableProducer>& producers,
              const std::vector<ThreadStreams>& streams) {
  holoscan::ReleaseThreadOptions options;
  options.backlog_limit = limit;
  if (auto set = holoscan::set_release_thread_options(options); !set) {
    std::fprintf(stderr, "set_release_thread_options: %s\n", set.error().message.c_str());
    std::exit(1);
  }
  const std::size_t events_before = holoscan::created_stream_events(0);
  std::atomic<bool> stop{false};
  std::atomic<long> hops{0};
  std::vector<std::thread> threads;
  const auto started = std::chrono::steady_clock::now();
  for (std::size_t t = 0; t < streams.size(); ++t) {
    threads.emplace_back([&, t] { hops += hop_until(stop, &producers[t].managed, streams[t]); });
  }
  RunResult result;
  const auto until = started + std::chrono::seconds(seconds);
  while (std::chrono::steady_clock::now() < until) {
    result.most_pending = std::max(result.most_pending, holoscan::pending_deferred_releases());
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  stop = true;
  for (auto& thread : threads) {
    thread.join();
  }
  const double spent =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  holoscan::flush_deferred_releases();  // before the producers (the deleters' tensors) may go
  result.events_made = holoscan::created_stream_events(0) - events_before;
  result.hops_per_second = static_cast<double>(hops.load()) / spent;
  return result;
}

bool device_answers() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    (void)cudaGetLastError();
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2;
  int seconds = 3;
  bool zero_cost = false;
  int positional = 0;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--zero-cost") == 0) {
      zero_cost = true;
    } else if (positional++ == 0) {
      threads = std::atoi(argv[i]);
    } else {
      seconds = std::atoi(argv[i]);
    }
  }
  zero_cost = zero_cost || !device_answers();
  if (threads < 1 || seconds < 1 || (zero_cost && threads * kStreamsPerThread > kZeroCostStreams)) {
    std::fprintf(
        stderr,
        "usage: holoscan_dlpack_release_backlog [threads (1-16)] [seconds] [--zero-cost]\n");
    return 2;
  }

  // The producers' memory and streams, made before the zero-cost table (if any) goes in and kept
  // until every release has run.
  static std::array<float, holoscan_bench::ReusableProducer::kElements> host_data{};
  void* data = host_data.data();
  if (!zero_cost && cudaMalloc(&data, sizeof(host_data)) != cudaSuccess) {
    std::fprintf(stderr, "cudaMalloc failed\n");
    return 1;
  }
  std::deque<holoscan_bench::ReusableProducer> producers;
  std::vector<ThreadStreams> streams(static_cast<std::size_t>(threads));
  for (int t = 0; t < threads; ++t) {
    producers.emplace_back(data, DLDevice{kDLCUDA, 0});
    for (int s = 0; s < kStreamsPerThread; ++s) {
      cudaStream_t& stream = streams[static_cast<std::size_t>(t)][static_cast<std::size_t>(s)];
      if (zero_cost) {
        stream = holoscan_bench::ZeroCostCudaScope::stream(t * kStreamsPerThread + s);
      } else if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
        std::fprintf(stderr, "cudaStreamCreateWithFlags failed\n");
        return 1;
      }
    }
  }
  std::unique_ptr<holoscan_bench::ZeroCostCudaScope> scope;
  if (zero_cost) {
    scope = std::make_unique<holoscan_bench::ZeroCostCudaScope>();
  }
  const std::size_t default_limit = holoscan::ReleaseThreadOptions{}.backlog_limit;
  for (const std::size_t limit : {default_limit, std::size_t{0}}) {
    const RunResult result = run(limit, seconds, producers, streams);
    std::printf(
        "RESULT release_backlog cuda=%s threads=%d seconds=%d limit=%zu most_pending=%zu "
        "events_made=%zu hops_per_s=%.0f\n",
        zero_cost ? "zero-cost" : "real", threads, seconds, limit, result.most_pending,
        result.events_made, result.hops_per_second);
    std::fflush(stdout);
  }
  scope.reset();
  (void)holoscan::set_release_thread_options({});
  return 0;
}
