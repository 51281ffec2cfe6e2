#include "hop_calls.hpp"

#include <algorithm>
#include <chrono>
#include <utility>
#include <vector>

#include <holoscan/deferred_release.hpp>
#include <holoscan/tensor.hpp>

namespace holoscan_bench {
namespace {

using Clock = std::chrono::steady_clock;

double ns_since(Clock::time_point start) {
  return std::chrono::duration<double, std::nano>(Clock::now() - start).count();
}

void run_hops(const std::function<DLManagedTensorVersioned*()>& make, cudaStream_t producer,
              const std::array<cudaStream_t, kHopConsumers>& consumers, int hops) {
  for (int i = 0; i < hops; ++i) {
    auto tensor = holoscan::make_tensor_from_dlpack_versioned(make());
    if (!tensor) {
      std::fprintf(stderr, "hop calls: import refused: %s\n", tensor.error().message.c_str());
      return;
    }
    (void)tensor->set_readiness_stream(producer);
    for (cudaStream_t consumer : consumers) {
      (void)tensor->synchronize_for_consumer_stream(consumer);
      (void)tensor->set_deallocation_stream(consumer);
    }
  }
  holoscan::flush_deferred_releases();
}

// Nanoseconds inside this thread's timed calls so far, and the calls so far.
struct CallTotals {
  double nanos = 0;
  double calls = 0;
};
CallTotals call_totals() noexcept {
  const CallNanos nanos = library_call_nanos_by_entry_on_this_thread();
  const CallCounts calls = library_calls_by_entry_on_this_thread();
  CallTotals totals;
  for (std::size_t i = 0; i < kCountedEntries; ++i) {
    totals.nanos += static_cast<double>(nanos[i]);
    totals.calls += static_cast<double>(calls[i]);
  }
  return totals;
}

// The hops again, each step between two clock readings (the call totals read outside them): adds
// each step's own work (its time less the time inside its calls, one empty timing per call and
// one for the step's own readings) to `own`, summed over the hops.
void run_timed_steps(const std::function<DLManagedTensorVersioned*()>& make, cudaStream_t producer,
                     const std::array<cudaStream_t, kHopConsumers>& consumers, int hops,
                     double empty_timing, std::array<double, kHopSteps>& own) {
  const auto timed = [&](HopStep step, auto&& run_step) {
    const CallTotals before = call_totals();
    const auto start = Clock::now();
    run_step();
    const double elapsed = ns_since(start);
    const CallTotals after = call_totals();
    own[static_cast<std::size_t>(step)] += elapsed - (after.nanos - before.nanos) -
                                           (after.calls - before.calls + 1) * empty_timing;
  };
  for (int i = 0; i < hops; ++i) {
    holoscan::Tensor tensor;
    timed(HopStep::kImport, [&] {
      if (auto imported = holoscan::make_tensor_from_dlpack_versioned(make())) {
        tensor = std::move(*imported);
      }
    });
    if (!tensor) {
      std::fprintf(stderr, "hop calls: import refused\n");
      return;
    }
    timed(HopStep::kReadiness, [&] { (void)tensor.set_readiness_stream(producer); });
    for (cudaStream_t consumer : consumers) {
      timed(HopStep::kWaits, [&] { (void)tensor.synchronize_for_consumer_stream(consumer); });
      timed(HopStep::kDeallocation, [&] { (void)tensor.set_deallocation_stream(consumer); });
    }
    timed(HopStep::kDrop, [&] { tensor = holoscan::Tensor(); });
  }
  holoscan::flush_deferred_releases();
}

}  // namespace

CallsPerHop count_hop_calls(const std::function<DLManagedTensorVersioned*()>& make,
                            cudaStream_t producer,
                            const std::array<cudaStream_t, kHopConsumers>& consumers, int hops,
                            int warm_up) {
  run_hops(make, producer, consumers, warm_up);
  const CallCounts caller_before = library_calls_by_entry_on_this_thread();
  const CallCounts all_before = library_calls_by_entry_in_all();
  run_hops(make, producer, consumers, hops);
  const CallCounts caller_after = library_calls_by_entry_on_this_thread();
  const CallCounts all_after = library_calls_by_entry_in_all();
  CallsPerHop calls;
  for (std::size_t i = 0; i < kCountedEntries; ++i) {
    const auto caller = caller_after[i] - caller_before[i];
    calls.caller[i] = static_cast<double>(caller) / hops;
    calls.release[i] = static_cast<double>(all_after[i] - all_before[i] - caller) / hops;
  }
  return calls;
}

double empty_timing_ns(int samples) {
  std::vector<double> timings(static_cast<std::size_t>(samples));
  for (double& timing : timings) {
    timing = ns_since(Clock::now());
  }
  std::nth_element(timings.begin(), timings.begin() + samples / 2, timings.end());
  return timings[static_cast<std::size_t>(samples / 2)];
}

HopTime time_hops(const std::function<DLManagedTensorVersioned*()>& make, cudaStream_t producer,
                  const std::array<cudaStream_t, kHopConsumers>& consumers, int hops, int warm_up) {
  HopTime time;
  time.empty_timing = empty_timing_ns();
  // The wall time through the table in use before counting: the counting table's own cost (a
  // shared counter per call) is not the library's.
  const holoscan::detail::CudaApi* counting = holoscan::detail::install_cuda_api(counted_base_table());
  run_hops(make, producer, consumers, warm_up);
  // The flush at the end of each run is the release thread's work, not the hops': one hop's
  // worth of it (at most) is inside `wall`.
  auto start = Clock::now();
  run_hops(make, producer, consumers, hops);
  time.wall = ns_since(start) / hops;
  holoscan::detail::install_cuda_api(counting);

  const CallCounts calls_before = library_calls_by_entry_on_this_thread();
  const CallNanos nanos_before = library_call_nanos_by_entry_on_this_thread();
  time_library_cuda_calls(true);
  start = Clock::now();
  run_hops(make, producer, consumers, hops);
  time.timed_wall = ns_since(start) / hops;
  time_library_cuda_calls(false);
  const CallCounts calls_after = library_calls_by_entry_on_this_thread();
  const CallNanos nanos_after = library_call_nanos_by_entry_on_this_thread();
  double calls = 0;
  for (std::size_t i = 0; i < kCountedEntries; ++i) {
    time.per_entry[i] = static_cast<double>(nanos_after[i] - nanos_before[i]) / hops;
    time.in_calls += time.per_entry[i];
    calls += static_cast<double>(calls_after[i] - calls_before[i]) / hops;
  }
  time.in_calls -= calls * time.empty_timing;

  time_library_cuda_calls(true);
  start = Clock::now();
  run_timed_steps(make, producer, consumers, hops, time.empty_timing, time.own_by_step);
  time.steps_wall = ns_since(start) / hops;
  time_library_cuda_calls(false);
  for (double& own : time.own_by_step) {
    own /= hops;
  }
  return time;
}

void print_calls_per_hop(std::FILE* out, const char* title, const CallsPerHop& calls) {
  std::fprintf(out, "%s: CUDA calls per hop (caller / release thread)\n", title);
  for (std::size_t i = 0; i < kCountedEntries; ++i) {
    if (calls.caller[i] != 0 || calls.release[i] != 0) {
      std::fprintf(out, "  %-28s %8.3f %8.3f\n", kCountedEntryNames[i], calls.caller[i],
                   calls.release[i]);
    }
  }
  std::fprintf(out, "  %-28s %8.3f %8.3f\n", "all", CallsPerHop::total(calls.caller),
               CallsPerHop::total(calls.release));
}

}  // namespace holoscan_bench
