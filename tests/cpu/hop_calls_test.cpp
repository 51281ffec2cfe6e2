// The CUDA calls of a tensor's hop, counted at the library's CUDA table over the fake runtime: the
// caller's (exact) and the release thread's (per hop, averaged over the rounds that ran).
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <functional>

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

// A producer of CUDA tensors, its stream and the consumers' streams, on the fake runtime.
class HopCalls : public test::FakeCudaTest {
 protected:
  void SetUp() override {
    test::FakeCudaTest::SetUp();
    spec_.shape = {8, 3, 32, 32};
    spec_.device = DLDevice{kDLCUDA, 0};
    stream_ = fake().create_stream(0);
    for (auto& consumer : consumers_) {
      consumer = fake().create_stream(0);
    }
  }
  // A fresh tensor of the producer, for each hop.
  std::function<DLManagedTensorVersioned*()> make() {
    return [this] { return producer_.make_versioned(spec_); };
  }

  CountingProducer producer_;
  TensorSpec spec_;
  cudaStream_t stream_ = nullptr;
  std::array<cudaStream_t, kHopConsumers> consumers_{};
};

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
  const detail::CudaApi* previous =
      holoscan_bench::count_library_cuda_calls(&test::FakeCuda::table());
  const CallsPerHop calls = holoscan_bench::count_hop_calls(make(), stream_, consumers_, 2000, 200);
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
  EXPECT_EQ(producer_.deleter_calls(), 2200);
}

// The timing splits a hop's time into its CUDA calls and the rest: the calls made are timed (and
// only they), and the time inside them is part of the hop's.
TEST_F(HopCalls, TimingAttributesTimeToTheCallsMadeAndNoMoreThanTheHopTakes) {
  const detail::CudaApi* previous =
      holoscan_bench::count_library_cuda_calls(&test::FakeCuda::table());
  const holoscan_bench::HopTime time =
      holoscan_bench::time_hops(make(), stream_, consumers_, 2000, 200);
  detail::install_cuda_api(previous);
  EXPECT_GT(time.per_entry[entry("cudaEventRecord")], 0.0);
  EXPECT_GT(time.per_entry[entry("cudaStreamWaitEvent")], 0.0);
  EXPECT_EQ(time.per_entry[entry("cudaEventQuery")], 0.0);  // the caller asks nothing
  EXPECT_GT(time.in_calls, 0.0);
  EXPECT_GT(time.empty_timing, 0.0);
  EXPECT_GT(time.wall, 0.0);
  EXPECT_EQ(producer_.deleter_calls(), 6200);  // three timed runs after the warm-up
  // The time inside the calls is part of the run that timed them (one thread, no overlap): a
  // call counted twice, or timed outside the table, would exceed it.
  double timed = 0;
  for (double entry_ns : time.per_entry) {
    timed += entry_ns;
  }
  EXPECT_LE(timed, time.timed_wall);
  // The steps' own work is part of the run that timed them, and an import does work of its own
  // (validation, the context) with no CUDA call to take it off.
  double own = 0;
  for (double step_ns : time.own_by_step) {
    own += step_ns;
  }
  EXPECT_LE(own, time.steps_wall);
  EXPECT_GT(time.own_by_step[static_cast<std::size_t>(holoscan_bench::HopStep::kImport)], 0.0);
}

}  // namespace
}  // namespace holoscan
