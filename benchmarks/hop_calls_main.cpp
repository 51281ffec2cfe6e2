// holoscan_dlpack_hop_calls: the CUDA calls of a tensor's hop on a real GPU, counted at the
// library's CUDA table (the same loop as the CPU test HopCalls, which runs it on the fake runtime),
// on the caller's thread and on the release thread; then where the hop's time goes on the
// caller's thread (inside the library's CUDA calls, or in its own work between them), beside the
// hop done by hand (the floor) timed the same way. Usage: holoscan_dlpack_hop_calls [hops]
#include <cuda_runtime_api.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include <holoscan/event_pool.hpp>

#include "hop_calls.hpp"
#include "reusable_producer.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double ns_since(Clock::time_point start) {
  return std::chrono::duration<double, std::nano>(Clock::now() - start).count();
}

/** @brief The floor's hop: one record on the producer, then each consumer waits and records. */
struct FloorHop {
  cudaEvent_t ready = nullptr;
  std::array<cudaEvent_t, holoscan_bench::kHopConsumers> done{};

  FloorHop() {
    (void)cudaEventCreateWithFlags(&ready, cudaEventDisableTiming);
    for (auto& event : done) {
      (void)cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
    }
  }
  ~FloorHop() {
    (void)cudaEventDestroy(ready);
    for (auto& event : done) {
      (void)cudaEventDestroy(event);
    }
  }
  FloorHop(const FloorHop&) = delete;
  FloorHop& operator=(const FloorHop&) = delete;

  // Runs `hops` hops; with `in_calls`, adds the time inside each call to it.
  template <class Consumers>
  void run(cudaStream_t producer, const Consumers& consumers, int hops, double* in_calls) {
    const auto call = [in_calls](auto&& make_call) {
      if (in_calls == nullptr) {
        (void)make_call();
        return;
      }
      const auto start = Clock::now();
      (void)make_call();
      *in_calls += ns_since(start);
    };
    for (int i = 0; i < hops; ++i) {
      call([&] { return cudaEventRecord(ready, producer); });
      for (std::size_t c = 0; c < consumers.size(); ++c) {
        call([&] { return cudaStreamWaitEvent(consumers[c], ready, 0); });
        call([&] { return cudaEventRecord(done[c], consumers[c]); });
      }
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  const int hops = argc > 1 ? std::atoi(argv[1]) : 20000;
  holoscan_bench::ReusableProducer* producer = holoscan_bench::device_producer();
  if (producer == nullptr) {
    std::printf("hop calls: no CUDA device here; nothing to count\n");
    return 0;
  }
  cudaStream_t stream = nullptr;
  std::array<cudaStream_t, holoscan_bench::kHopConsumers> consumers{};
  if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
    return 1;
  }
  for (auto& consumer : consumers) {
    if (cudaStreamCreateWithFlags(&consumer, cudaStreamNonBlocking) != cudaSuccess) {
      return 1;
    }
  }
  (void)holoscan::reserve_stream_events(0, 256);
  (void)holoscan_bench::count_library_cuda_calls();
  const auto calls = holoscan_bench::count_hop_calls([producer] { return &producer->managed; },
                                                     stream, consumers, hops, hops / 10);
  holoscan_bench::print_calls_per_hop(stdout, "hop, 3 consumers, real runtime", calls);
  std::printf("RESULT hop_calls caller=%.3f release=%.3f hops=%d\n",
              holoscan_bench::CallsPerHop::total(calls.caller),
              holoscan_bench::CallsPerHop::total(calls.release), hops);

  // Where the time goes, library then floor, each twice (untimed, then every call timed).
  const holoscan_bench::HopTime time = holoscan_bench::time_hops(
      [producer] { return &producer->managed; }, stream, consumers, hops, hops / 10);
  std::printf(
      "hop, library: %.1f ns, of which %.1f inside its CUDA calls and %.1f its own work "
      "(an empty timing costs %.1f ns, taken off each call; %.1f ns a hop while timed)\n",
      time.wall, time.in_calls, time.own(), time.empty_timing, time.timed_wall);
  std::printf("  own work by step (timed apart):");
  for (std::size_t i = 0; i < holoscan_bench::kHopSteps; ++i) {
    std::printf(" %s %.1f ns%s", holoscan_bench::kHopStepNames[i], time.own_by_step[i],
                i + 1 < holoscan_bench::kHopSteps ? "," : "\n");
  }
  for (std::size_t i = 0; i < holoscan_bench::kCountedEntries; ++i) {
    if (time.per_entry[i] != 0) {
      std::printf("  %-28s %8.1f ns per hop (uncorrected)\n", holoscan_bench::kCountedEntryNames[i],
                  time.per_entry[i]);
    }
  }
  FloorHop floor;
  floor.run(stream, consumers, hops / 10, nullptr);
  auto start = Clock::now();
  floor.run(stream, consumers, hops, nullptr);
  const double floor_wall = ns_since(start) / hops;
  double floor_in_calls = 0;
  floor.run(stream, consumers, hops, &floor_in_calls);
  floor_in_calls =
      floor_in_calls / hops - (1 + 2 * holoscan_bench::kHopConsumers) * time.empty_timing;
  std::printf("hop, floor: %.1f ns, of which %.1f inside its %d CUDA calls\n", floor_wall,
              floor_in_calls, 1 + 2 * holoscan_bench::kHopConsumers);
  std::printf(
      "RESULT hop_time library=%.1f library_in_calls=%.1f library_own=%.1f floor=%.1f "
      "floor_in_calls=%.1f\n",
      time.wall, time.in_calls, time.own(), floor_wall, floor_in_calls);
  std::printf("RESULT hop_own_by_step");
  for (std::size_t i = 0; i < holoscan_bench::kHopSteps; ++i) {
    std::printf(" %s=%.1f", holoscan_bench::kHopStepNames[i], time.own_by_step[i]);
  }
  std::printf("\n");
  (void)cudaDeviceSynchronize();
  return 0;
}
