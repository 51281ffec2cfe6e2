#include "hop_calls.hpp"

#include <holoscan/deferred_release.hpp>
#include <holoscan/tensor.hpp>

namespace holoscan_bench {
namespace {

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
