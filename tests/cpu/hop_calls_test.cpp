// The CUDA calls of a tensor's hop, counted at the library's CUDA table over the fake runtime: the
// caller's (exact) and the release thread's (per hop, averaged over the rounds that ran).
#include <gtest/gtest.h>

#include <array>
#include <cstdio>

#include "counted_cuda_api.hpp"
#include "hop_calls.hpp"
#include "support/counting_producer.hpp"
#include "support/fake_cuda_test.hpp"

namespace holoscan {
namespace {

using holoscan_bench::CallsPerHop;
using holoscan_bench::kHopConsumers;
using test::CountingProducer;
using test::TensorSpec;

class HopCalls : public test::FakeCudaTest {};

std::size_t entry(const char* name) {
  for (std::size_t i = 0; i < holoscan_bench::kCountedEntries; ++i) {
    if (std::string(holoscan_bench::kCountedEntryNames[i]) == name) {
      return i;
    }
  }
  ADD_FAILURE() << name << " is not an entry";
  return 0;
}

TEST_F(HopCalls, CallerMakesTheHandWrittenCallsAndTheReleaseThreadOnlyAsks) {
  CountingProducer producer;
  TensorSpec spec;
  spec.shape = {8, 3, 32, 32};
  spec.device = DLDevice{kDLCUDA, 0};
  cudaStream_t stream = fake().create_stream(0);
  std::array<cudaStream_t, kHopConsumers> consumers{};
  for (auto& consumer : consumers) {
    consumer = fake().create_stream(0);
  }
  const detail::CudaApi* previous =
      holoscan_bench::count_library_cuda_calls(&test::FakeCuda::table());
  const CallsPerHop calls = holoscan_bench::count_hop_calls(
      [&] { return producer.make_versioned(spec); }, stream, consumers, 2000, 200);
  detail::install_cuda_api(previous);
  holoscan_bench::print_calls_per_hop(stdout, "hop, 3 consumers, fake runtime", calls);
  // One record for readiness, then per consumer one wait and one record: the hand-written floor.
  EXPECT_EQ(calls.caller[entry("cudaEventRecord")], 1.0 + kHopConsumers);
  EXPECT_EQ(calls.caller[entry("cudaStreamWaitEvent")], 1.0 * kHopConsumers);
  EXPECT_EQ(calls.caller[entry("cudaEventQuery")], 0.0);
  // Each record first asks whether the stream is capturing, and for its id (its device is known
  // by id once seen).
  EXPECT_EQ(calls.caller[entry("cudaStreamIsCapturing")], 1.0 + kHopConsumers);
  EXPECT_EQ(calls.caller[entry("cudaStreamGetId")], 1.0 + kHopConsumers);
  // The release thread fans nothing in: it only asks each stream how far it has got.
  EXPECT_EQ(calls.release[entry("cudaStreamWaitEvent")], 0.0);
  EXPECT_EQ(calls.release[entry("cudaEventRecord")], 0.0);
  EXPECT_EQ(producer.deleter_calls(), 2200);
}

}  // namespace
}  // namespace holoscan
