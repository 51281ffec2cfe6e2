#pragma once
// What the hand-made floors of the cross-process benchmark share: records on a Unix socket, the
// library's own frames for their sizes, interprocess events exchanged once, device memory (and its
// handle, mapped once by the pipeline floor's readers). No validation, no claims, no pool: those
// are the library's work, not the floor's.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ipc/roles.hpp"
#include "ipc/wire/ipc_frame.hpp"  // the library's own frames (internal)

namespace ipc_demo {

/** @brief Sends one record, with `fd` attached when it is not -1; false on failure (printed). */
bool send_record(int socket, const std::uint8_t* bytes, std::size_t size, int fd);

/**
 * @brief Receives one record into `bytes` (spinning on MSG_DONTWAIT, or blocking), closing any
 *        descriptor that came with it as an importer does once its mapping is cached; its size,
 *        or -1.
 */
long receive_record(int socket, std::uint8_t* bytes, std::size_t capacity, bool spin);

/** @brief Whether `status` is cudaSuccess; prints `call` and the error's name when it is not. */
bool check_cuda(cudaError_t status, const char* call);

/** @brief Interprocess events of this process, and as many of the other side's, opened here. */
struct EventSet {
  std::vector<cudaEvent_t> own;   ///< Recorded here.
  std::vector<cudaEvent_t> peer;  ///< Recorded by the other side, waited on here.
};

/**
 * @brief Makes `count` interprocess events, sends their handles on `socket`, and opens as many
 *        received from the other side (which calls this too); false on failure (printed).
 */
bool exchange_events(int socket, std::size_t count, EventSet& events);

/**
 * @brief Orders `stream` after `event` of another process: a cudaStreamWaitEvent, or with
 *        `on_host` asking cudaEventQuery until it completed; false on failure (printed).
 */
bool wait_for_event(cudaStream_t stream, cudaEvent_t event, bool on_host);

/**
 * @brief One side's half of a hand-off: records `event` on `stream`, then sends `frame` (with
 *        `fd` attached when it is not -1); false on failure (printed).
 */
bool record_then_send(cudaEvent_t event, cudaStream_t stream, int socket,
                      const holoscan::ipc::detail::Frame& frame, int fd);

/**
 * @brief The other half: receives one record, which must be `frame`'s size, then orders `stream`
 *        after `event` (wait_for_event); false on failure or on a record of another size.
 */
bool receive_then_wait(int socket, const holoscan::ipc::detail::Frame& frame, bool spin,
                       cudaStream_t stream, cudaEvent_t event, bool on_host);

/** @brief The frames the library sends for one tensor of `shape`: its Publish and its Release. */
struct Frames {
  holoscan::ipc::detail::Frame publish;  ///< An export's descriptor, as the library encodes it.
  holoscan::ipc::detail::Frame release;  ///< A Release with an event, as the library encodes it.
};

/** @brief Encodes the frames of one tensor of `shape`; false on failure (printed). */
bool library_frames(const RunShape& shape, Frames& frames);

/** @brief Sends the interprocess handle of `memory` (from cudaMalloc); false on failure (printed).
 */
bool send_memory(int socket, void* memory);

/** @brief Receives a handle sent by send_memory and maps it into `mapped`; false on failure. */
bool open_memory(int socket, std::uint32_t*& mapped);

/** @brief `tensors` tensors of `shape.elements` uint32 in device memory (null on failure). */
std::uint32_t* device_buffer(const RunShape& shape, std::size_t tensors);

}  // namespace ipc_demo
