#pragma once
// Stream arguments from Python: integers, objects with `__cuda_stream__()` (the CUDA stream
// protocol), torch streams (`cuda_stream`) and CuPy streams (`ptr`).
#include <nanobind/nanobind.h>

#include <cstdint>

#include <holoscan/cuda_handles.hpp>

namespace holoscan::python {

/** @brief CUDA's cudaStreamLegacy handle value (no CUDA header is needed here). */
inline const cudaStream_t kLegacyStream = reinterpret_cast<cudaStream_t>(std::uintptr_t{1});
/** @brief CUDA's cudaStreamPerThread handle value. */
inline const cudaStream_t kPerThreadStream = reinterpret_cast<cudaStream_t>(std::uintptr_t{2});

/**
 * @brief Whether a consumer on `consumer` needs no wait for a readiness point on `readiness`:
 *        both are this process's legacy default stream (one stream per device for every thread,
 *        so work queued on it runs after the point). The imports of this module record that
 *        stream as cudaStreamLegacy; a null readiness stream does not count, since a tensor from
 *        another process (holoscan::ipc) reports null for a stream that is not ours.
 */
inline bool ready_on_legacy_default(cudaStream_t readiness, cudaStream_t consumer) noexcept {
  return readiness == kLegacyStream && (consumer == nullptr || consumer == kLegacyStream);
}

/** @brief A consumer stream in the DLPack protocol's (array API) meaning. */
struct ProtocolStream {
  /** @brief What the caller asked for. */
  enum class Kind {
    kDefault,  ///< None: the legacy default stream.
    kNoSync,   ///< -1: the consumer orders the work itself.
    kStream,   ///< 1 (legacy), 2 (per-thread) or a stream handle.
  };
  Kind kind = Kind::kDefault;           ///< What was asked for.
  std::intptr_t value = 0;              ///< The protocol integer (1, 2 or a handle) for kStream.
  cudaStream_t handle = kLegacyStream;  ///< The stream to order, for kDefault and kStream.
  /** @brief The stream object passed (borrowed, for the call only), or null for an integer. */
  PyObject* object = nullptr;
};

/**
 * @brief Parses a DLPack `stream` argument: None, -1, 1, 2 or a handle, or a stream object (whose
 *        0 means the legacy default stream, as torch and CuPy mean it). A bare 0 is ambiguous and
 *        raises InvalidArgumentError, as the array API asks; other types raise TypeError.
 */
ProtocolStream parse_protocol_stream(nanobind::handle stream);

/**
 * @brief Parses a stream for the library's own calls (C++ meaning): None or 0 is the legacy
 *        default stream, 1 cudaStreamLegacy, 2 cudaStreamPerThread, else the handle.
 */
cudaStream_t parse_stream(nanobind::handle stream);

}  // namespace holoscan::python
