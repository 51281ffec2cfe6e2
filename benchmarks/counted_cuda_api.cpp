#include "counted_cuda_api.hpp"

#include <atomic>

#include "cuda/cuda_api.hpp"

namespace holoscan_bench {
namespace {

using holoscan::detail::CudaApi;

thread_local std::uint64_t calls_on_thread = 0;
std::atomic<std::uint64_t> calls_in_all{0};

template <auto Entry>
struct Counted;

// One forwarding function per entry, its signature taken from the entry's own type.
template <class R, class... A, R (*CudaApi::*Entry)(A...)>
struct Counted<Entry> {
  static R call(A... args) {
    ++calls_on_thread;
    calls_in_all.fetch_add(1, std::memory_order_relaxed);
    return (holoscan::detail::real_cuda_api().*Entry)(args...);
  }
};

template <auto Entry>
constexpr auto counted = &Counted<Entry>::call;

const CudaApi kCounting = {
    counted<&CudaApi::event_record>,
    counted<&CudaApi::stream_wait_event>,
    counted<&CudaApi::event_query>,
    counted<&CudaApi::event_synchronize>,
    counted<&CudaApi::event_create_with_flags>,
    counted<&CudaApi::event_destroy>,
    counted<&CudaApi::get_device>,
    counted<&CudaApi::set_device>,
    counted<&CudaApi::stream_get_device>,
    counted<&CudaApi::stream_is_capturing>,
    counted<&CudaApi::thread_exchange_stream_capture_mode>,
    counted<&CudaApi::malloc>,
    counted<&CudaApi::free>,
    counted<&CudaApi::get_last_error>,
    counted<&CudaApi::get_error_name>,
    counted<&CudaApi::get_error_string>,
    counted<&CudaApi::stream_synchronize>,
    counted<&CudaApi::pointer_get_attributes>,
    counted<&CudaApi::stream_get_id>,
    counted<&CudaApi::stream_create_with_flags>,
    counted<&CudaApi::malloc_async>,
    counted<&CudaApi::free_async>,
    counted<&CudaApi::malloc_host>,
    counted<&CudaApi::free_host>,
    counted<&CudaApi::malloc_managed>,
    counted<&CudaApi::memcpy_async>,
    counted<&CudaApi::memcpy_2d_async>,
};

}  // namespace

void count_library_cuda_calls() { (void)holoscan::detail::install_cuda_api(&kCounting); }

std::uint64_t library_calls_on_this_thread() noexcept { return calls_on_thread; }

std::uint64_t library_calls_in_all() noexcept {
  return calls_in_all.load(std::memory_order_relaxed);
}

}  // namespace holoscan_bench
