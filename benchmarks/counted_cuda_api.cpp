#include "counted_cuda_api.hpp"

#include <atomic>
#include <chrono>
#include <type_traits>

#include "cuda/cuda_api.hpp"

namespace holoscan_bench {
namespace {

using holoscan::detail::CudaApi;

thread_local CallCounts calls_on_thread{};
thread_local CallNanos nanos_on_thread{};
std::atomic<bool> timing{false};
std::array<std::atomic<std::uint64_t>, kCountedEntries> calls_in_all{};
std::atomic<const CudaApi*> base_table{nullptr};

std::uint64_t elapsed_ns(std::chrono::steady_clock::time_point start) noexcept {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count());
}

template <std::size_t Index, auto Entry>
struct Counted;

// One forwarding function per entry, its signature taken from the entry's own type.
template <std::size_t Index, class R, class... A, R (*CudaApi::*Entry)(A...)>
struct Counted<Index, Entry> {
  static R call(A... args) {
    ++calls_on_thread[Index];
    calls_in_all[Index].fetch_add(1, std::memory_order_relaxed);
    const CudaApi* base = base_table.load(std::memory_order_acquire);
    if (!timing.load(std::memory_order_relaxed)) {
      return (base->*Entry)(args...);
    }
    const auto start = std::chrono::steady_clock::now();
    if constexpr (std::is_void_v<R>) {
      (base->*Entry)(args...);
      nanos_on_thread[Index] += elapsed_ns(start);
    } else {
      R result = (base->*Entry)(args...);
      nanos_on_thread[Index] += elapsed_ns(start);
      return result;
    }
  }
};

template <std::size_t Index, auto Entry>
constexpr auto counted = &Counted<Index, Entry>::call;

const CudaApi kCounting = {
    counted<0, &CudaApi::event_record>,
    counted<1, &CudaApi::stream_wait_event>,
    counted<2, &CudaApi::event_query>,
    counted<3, &CudaApi::event_synchronize>,
    counted<4, &CudaApi::event_create_with_flags>,
    counted<5, &CudaApi::event_destroy>,
    counted<6, &CudaApi::get_device>,
    counted<7, &CudaApi::set_device>,
    counted<8, &CudaApi::stream_get_device>,
    counted<9, &CudaApi::stream_is_capturing>,
    counted<10, &CudaApi::thread_exchange_stream_capture_mode>,
    counted<11, &CudaApi::malloc>,
    counted<12, &CudaApi::free>,
    counted<13, &CudaApi::get_last_error>,
    counted<14, &CudaApi::get_error_name>,
    counted<15, &CudaApi::get_error_string>,
    counted<16, &CudaApi::stream_synchronize>,
    counted<17, &CudaApi::pointer_get_attributes>,
    counted<18, &CudaApi::stream_get_id>,
    counted<19, &CudaApi::stream_create_with_flags>,
    counted<20, &CudaApi::malloc_async>,
    counted<21, &CudaApi::free_async>,
    counted<22, &CudaApi::malloc_host>,
    counted<23, &CudaApi::free_host>,
    counted<24, &CudaApi::malloc_managed>,
    counted<25, &CudaApi::memcpy_async>,
    counted<26, &CudaApi::memcpy_2d_async>,
};
static_assert(sizeof(CudaApi) == kCountedEntries * sizeof(void*), "every entry is counted");

template <class Counts>
std::uint64_t sum(const Counts& counts) noexcept {
  std::uint64_t total = 0;
  for (const auto& count : counts) {
    total += count;
  }
  return total;
}

}  // namespace

const std::array<const char*, kCountedEntries> kCountedEntryNames = {
    "cudaEventRecord",
    "cudaStreamWaitEvent",
    "cudaEventQuery",
    "cudaEventSynchronize",
    "cudaEventCreateWithFlags",
    "cudaEventDestroy",
    "cudaGetDevice",
    "cudaSetDevice",
    "cudaStreamGetDevice",
    "cudaStreamIsCapturing",
    "cudaThreadExchangeStreamCaptureMode",
    "cudaMalloc",
    "cudaFree",
    "cudaGetLastError",
    "cudaGetErrorName",
    "cudaGetErrorString",
    "cudaStreamSynchronize",
    "cudaPointerGetAttributes",
    "cudaStreamGetId",
    "cudaStreamCreateWithFlags",
    "cudaMallocAsync",
    "cudaFreeAsync",
    "cudaMallocHost",
    "cudaFreeHost",
    "cudaMallocManaged",
    "cudaMemcpyAsync",
    "cudaMemcpy2DAsync",
};

const CudaApi* count_library_cuda_calls(const CudaApi* base) {
  base_table.store(base != nullptr ? base : &holoscan::detail::real_cuda_api(),
                   std::memory_order_release);
  return holoscan::detail::install_cuda_api(&kCounting);
}

const CudaApi* counted_base_table() noexcept {
  return base_table.load(std::memory_order_acquire);
}

std::uint64_t library_calls_on_this_thread() noexcept { return sum(calls_on_thread); }

std::uint64_t library_calls_in_all() noexcept {
  std::uint64_t total = 0;
  for (const auto& count : calls_in_all) {
    total += count.load(std::memory_order_relaxed);
  }
  return total;
}

CallCounts library_calls_by_entry_on_this_thread() noexcept { return calls_on_thread; }

void time_library_cuda_calls(bool on) noexcept { timing.store(on, std::memory_order_relaxed); }

CallNanos library_call_nanos_by_entry_on_this_thread() noexcept { return nanos_on_thread; }

CallCounts library_calls_by_entry_in_all() noexcept {
  CallCounts counts{};
  for (std::size_t i = 0; i < kCountedEntries; ++i) {
    counts[i] = calls_in_all[i].load(std::memory_order_relaxed);
  }
  return counts;
}

}  // namespace holoscan_bench
