#include "holoscan/cuda_stream_sync.hpp"

#include <string>
#include <string_view>
#include <utility>

#include "cuda/cuda_error.hpp"
#include "stream/pooled_events.hpp"
#include "stream/stream_point.hpp"

namespace holoscan {
namespace {

// Holoscan 5.0 words a failed CUDA call of these functions "<call> failed during Tensor <what>:
// <CUDA's error string>": ours says the same sentence, then CUDA's error name and string.
expected<void, Error> during(expected<void, Error> result, const char* what) noexcept {
  if (!result) {
    std::string& message = result.error().message;
    constexpr std::string_view kFailed = " failed: ";
    if (const std::size_t at = message.find(kFailed); at != std::string::npos) {
      try {
        message.replace(at, kFailed.size(), std::string(" failed during ") + what + ": ");
      } catch (...) {  // out of host memory: the message still names the call and the error
      }
    }
  }
  return result;
}

expected<void, Error> order_streams(cudaStream_t producer_stream, cudaStream_t consumer_stream) {
  if (producer_stream == consumer_stream) {
    return {};
  }
  auto location = detail::locate_stream(producer_stream);
  if (!location) {
    return forward_error(std::move(location));
  }
  auto event = detail::acquire_event(location->device);
  if (!event) {
    return forward_error(std::move(event));
  }
  detail::StreamPoint point = location->point(producer_stream, *event);
  auto ordered = detail::record_point(point, producer_stream);
  if (ordered) {
    ordered = detail::check_cuda(detail::cuda().stream_wait_event(consumer_stream, *event, 0),
                                 "cudaStreamWaitEvent");
  }
  // The wait took the event's state at the call: the event may be recorded again at once.
  detail::release_event(location->device, *event);
  return ordered;
}

expected<void, Error> wait_for_stream(cudaStream_t producer_stream) {
  // Synchronizing a capturing stream would invalidate the capture: refuse it first.
  if (auto location = detail::locate_stream(producer_stream); !location) {
    return forward_error(std::move(location));
  }
  const detail::RelaxedCaptureScope relaxed;  // never refused for another thread's capture
  return detail::check_cuda(detail::cuda().stream_synchronize(producer_stream),
                            "cudaStreamSynchronize");
}

}  // namespace

expected<void, Error> synchronize_cuda_streams(cudaStream_t producer_stream,
                                               cudaStream_t consumer_stream) {
  return during(order_streams(producer_stream, consumer_stream), "Tensor stream sync");
}

expected<void, Error> synchronize_cuda_stream_for_host(cudaStream_t producer_stream) {
  return during(wait_for_stream(producer_stream), "Tensor host sync");
}

}  // namespace holoscan
