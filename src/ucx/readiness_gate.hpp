#pragma once
// Holds a send back until its tensor's readiness point has passed, without blocking the host: a
// stream of the worker waits for the point on the GPU (Tensor::synchronize_for_consumer) and an
// event recorded after that wait is queried. Every CUDA call goes through the core's CUDA table
// (internal: src/cuda_api.hpp), so that the CPU tests' fake runtime can play the GPU.
#include <cstddef>
#include <vector>

#include "cuda/cuda_api.hpp"
#include "holoscan/expected.hpp"
#include "holoscan/tensor.hpp"

namespace holoscan::ucx::detail {

/** @brief Per-device streams and events that tell when tensors' readiness points have passed. */
class ReadinessGate {
 public:
  /** @brief An event recorded after one tensor's readiness point. */
  struct Ticket {
    std::size_t device_slot = 0;   ///< Which of the gate's devices.
    cudaEvent_t event = nullptr;  ///< Recorded on that device's stream.
  };

  ReadinessGate() = default;
  /** @brief Destroys the gate's events and streams (each through the table that made it). */
  ~ReadinessGate();
  ReadinessGate(const ReadinessGate&) = delete;
  ReadinessGate& operator=(const ReadinessGate&) = delete;

  /**
   * @brief Orders an event after `tensor`'s readiness point: on the device of a CUDA tensor,
   *        else of its readiness stream. kFailure naming the CUDA call.
   */
  expected<Ticket, Error> arm(Tensor& tensor);
  /** @brief Whether the point has passed (queried, never waited for); kFailure on a CUDA error. */
  expected<bool, Error> passed(const Ticket& ticket);
  /** @brief Gives the ticket's event back for reuse. */
  void release(const Ticket& ticket) noexcept;

 private:
  struct Device {
    int ordinal = -1;
    const holoscan::detail::CudaApi* api = nullptr;  // the table that made stream and events
    cudaStream_t stream = nullptr;
    std::vector<cudaEvent_t> free_events;
    std::vector<cudaEvent_t> all_events;
  };
  expected<int, Error> device_of(const Tensor& tensor) const;
  expected<std::size_t, Error> slot_for(int ordinal);
  expected<cudaEvent_t, Error> take_event(Device& device);
  std::vector<Device> devices_;
};

}  // namespace holoscan::ucx::detail
