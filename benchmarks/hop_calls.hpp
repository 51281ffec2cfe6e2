#pragma once
// The CUDA calls a tensor's hop costs (import, readiness, three consumers that wait and record
// their deallocation points, drop), counted at the library's CUDA table: on the calling thread and
// on the library's release thread, per entry, averaged over many hops. The same loop runs against
// the fake runtime in the CPU tests and against the real one on a GPU (holoscan_dlpack_hop_calls).
#include <array>
#include <cstdio>
#include <functional>

#include <dlpack/dlpack.h>

#include "counted_cuda_api.hpp"
#include "holoscan/cuda_handles.hpp"

namespace holoscan_bench {

/** @brief Consumers of each hop. */
inline constexpr int kHopConsumers = 3;

/** @brief Calls per hop, per entry, by thread. */
struct CallsPerHop {
  std::array<double, kCountedEntries> caller{};   ///< Made by the thread that runs the hops.
  std::array<double, kCountedEntries> release{};  ///< Made by every other thread (the release
                                                  ///< thread's), until the flush after the hops.
  /** @brief All of `caller`, or all of `release`. */
  static double total(const std::array<double, kCountedEntries>& counts) {
    double sum = 0;
    for (double count : counts) {
      sum += count;
    }
    return sum;
  }
};

/**
 * @brief Runs `hops` hops of the tensors `make()` hands out (each a fresh DLPack tensor) from
 *        `producer` to `consumers`, after `warm_up` uncounted ones, and counts their calls; the
 *        counting table must be installed (count_library_cuda_calls). Flushes the deferred
 *        releases before each count, so that every release of the counted hops is in it.
 */
CallsPerHop count_hop_calls(const std::function<DLManagedTensorVersioned*()>& make,
                            cudaStream_t producer,
                            const std::array<cudaStream_t, kHopConsumers>& consumers, int hops,
                            int warm_up);

/** @brief Prints the entries called, per hop, caller and release thread side by side. */
void print_calls_per_hop(std::FILE* out, const char* title, const CallsPerHop& calls);

/** @brief The steps of a hop, in order, for HopTime::own_by_step. */
enum class HopStep : std::size_t {
  kImport,        ///< make_tensor_from_dlpack_versioned
  kReadiness,     ///< set_readiness_stream
  kWaits,         ///< the consumers' synchronize_for_consumer_stream, all of them
  kDeallocation,  ///< the consumers' set_deallocation_stream, all of them
  kDrop,          ///< the Tensor's destructor (the owner handed to the release thread)
};
/** @brief Steps of a hop. */
inline constexpr std::size_t kHopSteps = 5;
/** @brief The steps' names, in HopStep's order. */
inline constexpr std::array<const char*, kHopSteps> kHopStepNames = {
    "import", "readiness", "waits", "deallocation", "drop"};

/** @brief Where a hop's time goes on the calling thread, in nanoseconds per hop. */
struct HopTime {
  double wall = 0;        ///< The hops through the table in use before counting (no counting).
  double timed_wall = 0;  ///< The second run, every call timed: holds all of `per_entry`.
  double in_calls = 0;    ///< Inside the library's CUDA calls, each timed on a second run, less
                          ///< one empty timing per call (`empty_timing`).
  std::array<double, kCountedEntries> per_entry{};  ///< `in_calls` by entry, uncorrected.
  double empty_timing = 0;  ///< Two clock readings with nothing between, measured here.
  /** @brief The library's own work per step (the step's time less its CUDA calls and the
   *         readings), from a third run that times every step and every call. */
  std::array<double, kHopSteps> own_by_step{};
  double steps_wall = 0;  ///< The third run, every step and call timed: holds all of own_by_step.
  /** @brief The library's own work: the wall time outside its CUDA calls. */
  double own() const { return wall - in_calls; }
};

/**
 * @brief Times `hops` hops (after `warm_up` more) three times: through the table that was in use
 *        before counting (`wall`), with every call timed (`in_calls`), and with every step timed
 *        too (`own_by_step`). The counting table must be installed. The release thread's calls
 *        are not in it (another thread).
 */
HopTime time_hops(const std::function<DLManagedTensorVersioned*()>& make, cudaStream_t producer,
                  const std::array<cudaStream_t, kHopConsumers>& consumers, int hops, int warm_up);

/** @brief The median of `samples` empty timings: two steady_clock readings in a row, in ns. */
double empty_timing_ns(int samples = 10001);

}  // namespace holoscan_bench
