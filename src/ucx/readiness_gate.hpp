#pragma once
// Holds a send back until its tensor's readiness point has passed, without blocking the host: a
// stream of the worker waits for the point on the GPU (Tensor::synchronize_for_consumer) and an
// event recorded after that wait is queried. Each peer has its own stream per device: a stream
// orders everything queued on it, so a point that has not passed holds back only its own peer's
// later sends (which wait for it anyway), never another peer's. Every CUDA call goes through the
// core's CUDA table (internal: src/cuda_api.hpp), so that the CPU tests' fake runtime can play the
// GPU.
#include <cstddef>
#include <cstdint>
#include <unordered_map>
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
    std::size_t device_slot = 0;  ///< Which of the gate's devices.
    cudaEvent_t event = nullptr;  ///< Recorded on its peer's stream of that device.
  };

  ReadinessGate() = default;
  /** @brief Destroys the gate's events and streams (each through the table that made it). */
  ~ReadinessGate();
  ReadinessGate(const ReadinessGate&) = delete;
  ReadinessGate& operator=(const ReadinessGate&) = delete;

  /**
   * @brief Orders an event after `tensor`'s readiness point, on `peer`'s stream of the device of
   *        a CUDA tensor, else of its readiness stream. kFailure naming the CUDA call.
   */
  expected<Ticket, Error> arm(Tensor& tensor, std::uint64_t peer);
  /** @brief Whether the point has passed (queried, never waited for); kFailure on a CUDA error. */
  expected<bool, Error> passed(const Ticket& ticket);
  /** @brief Gives the ticket's event back for reuse. */
  void release(const Ticket& ticket) noexcept;
  /** @brief Destroys `peer`'s streams (a peer forgotten; its tickets were released). */
  void forget(std::uint64_t peer) noexcept;

 private:
  struct Device {
    int ordinal = -1;
    const holoscan::detail::CudaApi* api = nullptr;  // the table that made stream and events
    std::unordered_map<std::uint64_t, cudaStream_t> peer_streams;
    std::vector<cudaEvent_t> free_events;
    std::vector<cudaEvent_t> all_events;
  };
  expected<int, Error> device_of(const Tensor& tensor) const;
  expected<std::size_t, Error> slot_for(int ordinal);
  expected<cudaStream_t, Error> stream_for(Device& device, std::uint64_t peer);
  static void destroy_stream(const Device& device, cudaStream_t stream) noexcept;
  expected<cudaEvent_t, Error> take_event(Device& device);
  std::vector<Device> devices_;
};

}  // namespace holoscan::ucx::detail
