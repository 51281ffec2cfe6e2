#pragma once
/**
 * @file
 * @brief The lifetime and stream hooks that a Tensor calls on the memory behind it.
 */
#include "holoscan/cuda_handles.hpp"
#include "holoscan/expected.hpp"
#include "holoscan/export.hpp"

namespace holoscan {

/**
 * @brief Owner of the memory behind one or more Tensors, with the hooks that order its use.
 *
 * The defaults suit a reference whose shared ownership already gives the whole lifetime contract:
 * claims are not counted, no stream is tracked, and synchronization is a successful no-op.
 */
class HOLOSCAN_DLPACK_API TensorMemoryReference {
 public:
  TensorMemoryReference() = default;
  TensorMemoryReference(const TensorMemoryReference&) = delete;
  TensorMemoryReference& operator=(const TensorMemoryReference&) = delete;
  /** @brief Releases the memory; overrides decide when the producer's memory may be reused. */
  virtual ~TensorMemoryReference() = default;

  /** @brief Retains one live Tensor-handle claim; thread-safe, allocation-free, non-blocking. */
  virtual void retain_tensor_handle() noexcept {}
  /** @brief Releases one claim taken by retain_tensor_handle; same guarantees. */
  virtual void release_tensor_handle() noexcept {}

  /** @brief Records the stream after whose current work the memory may be reused. */
  virtual bool set_deallocation_stream(cudaStream_t /*stream*/) { return false; }
  /** @brief Whether this reference orders reuse after recorded deallocation streams. */
  virtual bool tracks_deallocation_stream() const noexcept { return false; }

  /** @brief Records the stream whose current work makes the data ready to read. */
  virtual bool set_readiness_stream(cudaStream_t /*stream*/) { return false; }
  /** @brief Whether this reference can order producer readiness against consumers. */
  virtual bool has_readiness_stream_contract() const noexcept { return false; }
  /** @brief The borrowed producer stream, or null when none is known in this process. */
  virtual cudaStream_t readiness_stream() const noexcept { return nullptr; }

  /** @brief Makes the data safe to consume on `consumer_stream`; the default does nothing. */
  virtual expected<void, Error> synchronize_for_consumer(cudaStream_t /*consumer_stream*/) {
    return {};
  }
  /** @brief Blocks the calling thread until the data is ready; the default does nothing. */
  virtual expected<void, Error> synchronize_for_host() { return {}; }
};

}  // namespace holoscan
