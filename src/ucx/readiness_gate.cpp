#include "readiness_gate.hpp"

#include <cuda_runtime_api.h>

#include "cuda/cuda_error.hpp"

namespace holoscan::ucx::detail {
namespace {

using holoscan::detail::check_cuda;
using holoscan::detail::CudaApi;

// Makes `ordinal` the current device for a scope (streams and events belong to the current one).
class CurrentDevice {
 public:
  CurrentDevice(const CudaApi& api, int ordinal) noexcept : api_(api) {
    if (api_.get_device(&previous_) == cudaSuccess && previous_ != ordinal) {
      switched_ = api_.set_device(ordinal) == cudaSuccess;
    }
  }
  ~CurrentDevice() {
    if (switched_) {
      (void)api_.set_device(previous_);
    }
  }
  CurrentDevice(const CurrentDevice&) = delete;
  CurrentDevice& operator=(const CurrentDevice&) = delete;

 private:
  const CudaApi& api_;
  int previous_ = -1;
  bool switched_ = false;
};

}  // namespace

ReadinessGate::~ReadinessGate() {
  for (Device& device : devices_) {
    CurrentDevice current(*device.api, device.ordinal);
    for (cudaEvent_t event : device.all_events) {
      (void)device.api->event_destroy(event);
    }
    for (const auto& [peer, stream] : device.peer_streams) {
      destroy_stream(device, stream);
    }
  }
}

void ReadinessGate::destroy_stream(const Device& device, cudaStream_t stream) noexcept {
  // The table has no cudaStreamDestroy; a fake runtime's streams need none. Work still queued on
  // the stream (a wait for a point that never passed) is let go by CUDA once it completes.
  if (device.api == &holoscan::detail::real_cuda_api() && stream != nullptr) {
    (void)cudaStreamDestroy(stream);
  }
}

expected<int, Error> ReadinessGate::device_of(const Tensor& tensor) const {
  const DLDevice where = tensor.device();
  if (where.device_type == kDLCUDA || where.device_type == kDLCUDAManaged) {
    return where.device_id;
  }
  // Host memory written by the GPU: the device that runs the producer's stream.
  const CudaApi& api = holoscan::detail::cuda();
  int ordinal = -1;
  const cudaStream_t stream = tensor.readiness_stream();
  const cudaError_t status =
      stream != nullptr ? api.stream_get_device(stream, &ordinal) : api.get_device(&ordinal);
  if (auto checked =
          check_cuda(status, stream != nullptr ? "cudaStreamGetDevice" : "cudaGetDevice");
      !checked) {
    return forward_error(std::move(checked));
  }
  return ordinal;
}

expected<std::size_t, Error> ReadinessGate::slot_for(int ordinal) {
  const CudaApi& api = holoscan::detail::cuda();
  for (std::size_t slot = 0; slot < devices_.size(); ++slot) {
    if (devices_[slot].ordinal == ordinal && devices_[slot].api == &api) {
      return slot;
    }
  }
  try {
    Device device;
    device.ordinal = ordinal;
    device.api = &api;
    devices_.push_back(std::move(device));
  } catch (...) {
    return tl::unexpected<Error>(
        Error{ErrorCode::kResourceExhausted, "ucx send: out of host memory for a device", 0});
  }
  return devices_.size() - 1;
}

expected<cudaStream_t, Error> ReadinessGate::stream_for(Device& device, std::uint64_t peer) {
  if (auto known = device.peer_streams.find(peer); known != device.peer_streams.end()) {
    return known->second;
  }
  CurrentDevice current(*device.api, device.ordinal);
  cudaStream_t stream = nullptr;
  if (auto created =
          check_cuda(device.api->stream_create_with_flags(&stream, cudaStreamNonBlocking),
                     "cudaStreamCreateWithFlags");
      !created) {
    return forward_error(std::move(created));
  }
  try {
    device.peer_streams.emplace(peer, stream);
  } catch (...) {  // a stream made and not kept would never be destroyed
    destroy_stream(device, stream);
    return tl::unexpected<Error>(
        Error{ErrorCode::kResourceExhausted, "ucx send: out of host memory for a stream", 0});
  }
  return stream;
}

expected<cudaEvent_t, Error> ReadinessGate::take_event(Device& device) {
  if (!device.free_events.empty()) {
    cudaEvent_t event = device.free_events.back();
    device.free_events.pop_back();
    return event;
  }
  // Room to keep the event is made before it is created: an event made and then not kept would
  // never be destroyed.
  try {
    device.all_events.reserve(device.all_events.size() + 1);
  } catch (...) {
    return tl::unexpected<Error>(Error{ErrorCode::kResourceExhausted,
                                       "ucx send: out of host memory for a readiness event", 0});
  }
  CurrentDevice current(*device.api, device.ordinal);
  cudaEvent_t event = nullptr;
  if (auto created = check_cuda(device.api->event_create_with_flags(&event, cudaEventDisableTiming),
                                "cudaEventCreateWithFlags");
      !created) {
    return forward_error(std::move(created));
  }
  device.all_events.push_back(event);  // into the room made above: never throws
  return event;
}

expected<ReadinessGate::Ticket, Error> ReadinessGate::arm(Tensor& tensor, std::uint64_t peer) {
  auto ordinal = device_of(tensor);
  if (!ordinal) {
    return forward_error(std::move(ordinal));
  }
  auto slot = slot_for(*ordinal);
  if (!slot) {
    return forward_error(std::move(slot));
  }
  Device& device = devices_[*slot];
  auto stream = stream_for(device, peer);
  if (!stream) {
    return forward_error(std::move(stream));
  }
  auto event = take_event(device);
  if (!event) {
    return forward_error(std::move(event));
  }
  const Ticket ticket{*slot, *event};
  expected<void, Error> waited;
  try {
    waited = tensor.synchronize_for_consumer_stream(*stream);  // a caller's hook may throw
  } catch (...) {
    release(ticket);
    throw;
  }
  if (!waited) {
    release(ticket);
    return forward_error(std::move(waited));
  }
  if (auto recorded = check_cuda(device.api->event_record(*event, *stream), "cudaEventRecord");
      !recorded) {
    release(ticket);
    return forward_error(std::move(recorded));
  }
  return ticket;
}

expected<bool, Error> ReadinessGate::passed(const Ticket& ticket) {
  const CudaApi& api = *devices_[ticket.device_slot].api;
  // Relaxed capture mode: a query must not invalidate a graph another thread is capturing.
  // A failed switch is not left as the thread's last error for the caller's own check.
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  const bool relaxed = api.thread_exchange_stream_capture_mode(&mode) == cudaSuccess;
  if (!relaxed) {
    (void)api.get_last_error();
  }
  const cudaError_t status = api.event_query(ticket.event);
  if (relaxed && api.thread_exchange_stream_capture_mode(&mode) != cudaSuccess) {
    (void)api.get_last_error();
  }
  if (status == cudaErrorNotReady) {
    return false;
  }
  if (auto checked = check_cuda(status, "cudaEventQuery"); !checked) {
    return forward_error(std::move(checked));
  }
  return true;
}

void ReadinessGate::forget(std::uint64_t peer) noexcept {
  for (Device& device : devices_) {
    if (auto known = device.peer_streams.find(peer); known != device.peer_streams.end()) {
      CurrentDevice current(*device.api, device.ordinal);
      destroy_stream(device, known->second);
      device.peer_streams.erase(known);
    }
  }
}

void ReadinessGate::release(const Ticket& ticket) noexcept {
  Device& device = devices_[ticket.device_slot];
  try {
    device.free_events.push_back(ticket.event);
  } catch (...) {
    // Kept in all_events: destroyed with the gate.
  }
}

}  // namespace holoscan::ucx::detail
