// One producer stream and N consumer streams share a ring of four buffers; the same frames are
// ordered three ways: host synchronization, hand-written events, and the library (a TensorPool
// with stream-ordered allocate, readiness, consumer waits and deallocation points). Each consumer
// checks on the GPU that it reads the frame the producer wrote for it. Reports ns per frame and
// CUDA calls per frame (the library's counted at its CUDA table, the rest where they are made),
// median of interleaved repetitions, for empty kernels and for ~20 us kernels.
//
// Usage: holoscan_dlpack_pipeline_benchmark [REPETITIONS] [JSON_OUT]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <holoscan/event_pool.hpp>
#include <holoscan/tensor_pool.hpp>

#include "counted_cuda_api.hpp"
#include "gpu/kernels.hpp"

namespace {

using holoscan::test::CheckResult;

constexpr std::size_t kRing = 4;
constexpr std::uint64_t kElements = 4096;
constexpr DLDataType kUint32{kDLUInt, 32, 1};

enum class Ordering { kHostSync, kEvents, kLibrary };
const char* name_of(Ordering ordering) {
  switch (ordering) {
    case Ordering::kHostSync:
      return "host-sync";
    case Ordering::kEvents:
      return "events";
    default:
      return "library";
  }
}

struct Regime {
  const char* name;
  std::uint64_t kernel_us;  // producer delay and consumer hold
  int frames;
};

// Calls the benchmark makes itself: launches and, for the two hand-made orderings, the runtime.
std::uint64_t own_calls = 0;
template <class Status>
void counted(Status status) {
  ++own_calls;
  if (static_cast<int>(status) != 0) {
    std::fprintf(stderr, "pipeline: a CUDA call failed (%d)\n", static_cast<int>(status));
    std::exit(2);
  }
}

struct Streams {
  cudaStream_t producer = nullptr;
  std::vector<cudaStream_t> consumers;
  explicit Streams(int count) : consumers(static_cast<std::size_t>(count)) {
    (void)cudaStreamCreateWithFlags(&producer, cudaStreamNonBlocking);
    for (auto& stream : consumers) {
      (void)cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    }
  }
  ~Streams() {
    (void)cudaDeviceSynchronize();
    (void)cudaStreamDestroy(producer);
    for (auto& stream : consumers) {
      (void)cudaStreamDestroy(stream);
    }
  }
};

// Device buffers, and one CheckResult per consumer that every check adds its mismatches to.
struct Run {
  Streams streams;
  std::array<std::uint32_t*, kRing> buffers{};
  CheckResult* results = nullptr;
  std::vector<cudaEvent_t> ready;  // per buffer
  std::vector<cudaEvent_t> done;   // per buffer and consumer
  std::shared_ptr<holoscan::TensorPool> pool;

  explicit Run(int consumers) : streams(consumers) {
    for (auto& buffer : buffers) {
      (void)cudaMalloc(reinterpret_cast<void**>(&buffer), kElements * sizeof(std::uint32_t));
    }
    (void)cudaMalloc(reinterpret_cast<void**>(&results), consumers * sizeof(CheckResult));
    (void)cudaMemset(results, 0, consumers * sizeof(CheckResult));
    ready.resize(kRing);
    done.resize(kRing * static_cast<std::size_t>(consumers));
    for (auto& event : ready) {
      (void)cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
    }
    for (auto& event : done) {
      (void)cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
    }
    pool = *holoscan::TensorPool::create(
        {holoscan::PoolMemory::kDevice, 0, kElements * sizeof(std::uint32_t), kRing});
    (void)holoscan::reserve_stream_events(0, 64);
  }
  ~Run() {
    (void)cudaDeviceSynchronize();
    for (auto& buffer : buffers) {
      (void)cudaFree(buffer);
    }
    (void)cudaFree(results);
    for (auto& event : ready) {
      (void)cudaEventDestroy(event);
    }
    for (auto& event : done) {
      (void)cudaEventDestroy(event);
    }
  }

  void frame(Ordering ordering, std::uint32_t seed, std::uint64_t kernel_us) {
    const std::size_t b = seed % kRing;
    const auto consumers = streams.consumers.size();
    switch (ordering) {
      case Ordering::kHostSync:
        if (seed >= kRing) {
          for (cudaStream_t consumer : streams.consumers) {
            counted(cudaStreamSynchronize(consumer));  // before the buffer is written again
          }
        }
        counted(holoscan::test::launch_slow_fill(buffers[b], kElements, seed, kernel_us,
                                                 streams.producer));
        counted(cudaStreamSynchronize(streams.producer));
        for (std::size_t c = 0; c < consumers; ++c) {
          counted(holoscan::test::launch_check(buffers[b], kElements, seed, kernel_us, results + c,
                                               streams.consumers[c]));
        }
        break;
      case Ordering::kEvents:
        if (seed >= kRing) {
          for (std::size_t c = 0; c < consumers; ++c) {
            counted(cudaStreamWaitEvent(streams.producer, done[b * consumers + c], 0));
          }
        }
        counted(holoscan::test::launch_slow_fill(buffers[b], kElements, seed, kernel_us,
                                                 streams.producer));
        counted(cudaEventRecord(ready[b], streams.producer));
        for (std::size_t c = 0; c < consumers; ++c) {
          counted(cudaStreamWaitEvent(streams.consumers[c], ready[b], 0));
          counted(holoscan::test::launch_check(buffers[b], kElements, seed, kernel_us, results + c,
                                               streams.consumers[c]));
          counted(cudaEventRecord(done[b * consumers + c], streams.consumers[c]));
        }
        break;
      case Ordering::kLibrary: {
        auto tensor =
            pool->allocate({static_cast<std::int64_t>(kElements)}, kUint32, streams.producer);
        if (!tensor) {
          std::fprintf(stderr, "pipeline: allocate: %s\n", tensor.error().message.c_str());
          std::exit(2);
        }
        auto* data = static_cast<std::uint32_t*>(tensor->data());
        counted(
            holoscan::test::launch_slow_fill(data, kElements, seed, kernel_us, streams.producer));
        tensor->set_readiness_stream(streams.producer);
        for (std::size_t c = 0; c < consumers; ++c) {
          if (!tensor->synchronize_for_consumer_stream(streams.consumers[c])) {
            std::exit(2);
          }
          counted(holoscan::test::launch_check(data, kElements, seed, kernel_us, results + c,
                                               streams.consumers[c]));
          tensor->set_deallocation_stream(streams.consumers[c]);
        }
        break;
      }
    }
  }

  unsigned mismatches() const {
    std::vector<CheckResult> seen(streams.consumers.size());
    (void)cudaMemcpy(seen.data(), results, seen.size() * sizeof(CheckResult),
                     cudaMemcpyDeviceToHost);
    unsigned total = 0;
    for (const auto& result : seen) {
      total += result.mismatches;
    }
    return total;
  }
};

struct Sample {
  double ns_per_frame;
  double calls_per_frame;      // on the issuing thread: launches, runtime calls, library calls
  double all_calls_per_frame;  // the release thread's library calls included
  unsigned mismatches;
};

Sample measure(Ordering ordering, int consumers, const Regime& regime) {
  Run run(consumers);
  std::uint32_t seed = 0;
  for (int i = 0; i < 32; ++i) {  // warm-up: events created, blocks handed out once
    run.frame(ordering, seed++, regime.kernel_us);
  }
  (void)cudaDeviceSynchronize();
  own_calls = 0;
  const auto library_before = holoscan_bench::library_calls_on_this_thread();
  const auto all_before = holoscan_bench::library_calls_in_all();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < regime.frames; ++i) {
    run.frame(ordering, seed++, regime.kernel_us);
  }
  (void)cudaDeviceSynchronize();
  const auto elapsed = std::chrono::steady_clock::now() - start;
  const double frames = regime.frames;
  const double library =
      static_cast<double>(holoscan_bench::library_calls_on_this_thread() - library_before);
  const double all = static_cast<double>(holoscan_bench::library_calls_in_all() - all_before);
  return Sample{std::chrono::duration<double, std::nano>(elapsed).count() / frames,
                (static_cast<double>(own_calls) + library) / frames,
                (static_cast<double>(own_calls) + all) / frames, run.mismatches()};
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("pipeline: no CUDA device, nothing measured\n");
    return 0;
  }
  const int repetitions = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
  std::FILE* json = argc > 2 ? std::fopen(argv[2], "w") : nullptr;
  holoscan_bench::count_library_cuda_calls();
  if (holoscan::test::load_all_kernels() != 0) {
    return 2;
  }
  const Regime regimes[] = {{"empty", 0, 3000}, {"20us", 20, 600}};
  const int consumer_counts[] = {1, 3, 8};
  const Ordering orderings[] = {Ordering::kHostSync, Ordering::kEvents, Ordering::kLibrary};
  std::printf("%-6s %-3s %-10s %12s %10s %10s %10s\n", "kernel", "N", "ordering", "ns/frame",
              "calls/fr", "all/fr", "vs events");
  if (json != nullptr) {
    std::fprintf(json, "[\n");
  }
  bool first_row = true;
  unsigned total_mismatches = 0;
  for (const Regime& regime : regimes) {
    for (int consumers : consumer_counts) {
      std::array<std::vector<double>, 3> ns;
      std::array<Sample, 3> last{};
      for (int rep = 0; rep < repetitions; ++rep) {
        for (int o = 0; o < 3; ++o) {  // interleaved: each repetition runs all three in turn
          last[o] = measure(orderings[o], consumers, regime);
          ns[o].push_back(last[o].ns_per_frame);
          total_mismatches += last[o].mismatches;
        }
      }
      const double events = median(ns[1]);
      for (int o = 0; o < 3; ++o) {
        const double value = median(ns[o]);
        std::printf("%-6s %-3d %-10s %12.0f %10.1f %10.1f %10.2f\n", regime.name, consumers,
                    name_of(orderings[o]), value, last[o].calls_per_frame,
                    last[o].all_calls_per_frame, value / events);
        if (json != nullptr) {
          std::fprintf(json,
                       "%s  {\"kernel\": \"%s\", \"consumers\": %d, \"ordering\": \"%s\", "
                       "\"ns_per_frame\": %.1f, \"calls_per_frame\": %.2f, "
                       "\"all_calls_per_frame\": %.2f, \"mismatches\": %u}",
                       first_row ? "" : ",\n", regime.name, consumers, name_of(orderings[o]), value,
                       last[o].calls_per_frame, last[o].all_calls_per_frame, last[o].mismatches);
          first_row = false;
        }
      }
    }
  }
  if (json != nullptr) {
    std::fprintf(json, "\n]\n");
    std::fclose(json);
  }
  std::printf("mismatched reads: %u\n", total_mismatches);
  return total_mismatches == 0 ? 0 : 1;
}
