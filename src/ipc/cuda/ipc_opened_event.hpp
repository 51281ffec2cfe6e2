#pragma once
// Another process's interprocess event, opened here (cudaIpcOpenEventHandle): the exporter's
// readiness event in an importer, the importer's release event in an exporter. Each side opens a
// handle once and keeps it in a cache, since the peer reuses its events.
#include <sys/types.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>

#include "holoscan/expected.hpp"
#include "holoscan/export.hpp"
#include "holoscan/ipc/descriptor.hpp"
#include "ipc/cuda/cuda_ipc_api.hpp"

namespace holoscan::detail {

/** @brief Bytes of a cudaIpcEventHandle_t or cudaIpcMemHandle_t. */
using IpcHandleBytes = std::array<std::uint8_t, ipc::kIpcHandleBytes>;

/** @brief Hash of handle bytes, for the caches keyed by them. */
struct HOLOSCAN_DLPACK_ABI IpcHandleHash {
  /** @brief FNV-1a over the bytes. */
  std::size_t operator()(const IpcHandleBytes& bytes) const noexcept;
};

/** @brief An opened interprocess event; destroyed (closed) with this object. */
class HOLOSCAN_DLPACK_ABI OpenedEvent {
 public:
  /** @brief Opens `handle` with `device` current. */
  static expected<std::shared_ptr<OpenedEvent>, Error> open(const IpcHandleBytes& handle,
                                                            int device);
  /** @brief Closes the event (errors are swallowed); in a child forked since it was opened,
   *         where CUDA cannot be used, leaves it to the child's exit instead. */
  ~OpenedEvent();
  OpenedEvent(const OpenedEvent&) = delete;
  OpenedEvent& operator=(const OpenedEvent&) = delete;

  /** @brief The event, for cudaStreamWaitEvent and cudaEventSynchronize through cuda_ipc(). */
  cudaEvent_t get() const noexcept { return event_; }
  /** @brief The device it was opened on. */
  int device() const noexcept { return device_; }

  /**
   * @brief Whether the peer's latest record of the event has completed; never blocks.
   *
   * Queried in relaxed capture mode. Any answer but success counts as "not yet": a capture
   * refusing the query says nothing about the GPU, and a broken event must not release memory
   * the peer may still use (an exporter stops waiting once the peer has exited instead).
   */
  bool completed() const noexcept;
  /**
   * @brief cudaEventQuery's answer for the event, asked in relaxed capture mode (the error cleared
   *        when it is one): cudaSuccess once completed, cudaErrorNotReady before, else the error.
   */
  cudaError_t query() const noexcept;

 private:
  OpenedEvent(cudaEvent_t event, int device) noexcept;
  cudaEvent_t event_;
  int device_;
  pid_t opener_;  // the process that opened it: a forked child's copy never calls CUDA
};

/**
 * @brief Opened events by handle, for one peer; not thread-safe (its owner locks).
 *
 * Keyed by the handle bytes alone, which is sound because the peer never destroys an event whose
 * handle it sent: both sides take their interprocess events from ipc_event_pool, which gives them
 * back to the pool, never to CUDA, while the process lives (IpcEventPool.PooledEventsAreNever...).
 * A handle seen again is the same event, recorded anew before the message that names it was sent.
 */
class HOLOSCAN_DLPACK_ABI OpenedEventCache {
 public:
  /**
   * @brief Events kept: past it, the ones no user holds are forgotten (closed) before another is
   *        cached, so that a peer that sends a new event with every message (another
   *        implementation) costs a bounded number of opened events, not one per message.
   */
  static constexpr std::size_t kMaxCached = 1024;

  /** @brief The event opened for `handle`, opening it (with `device` current) on first use. */
  expected<std::shared_ptr<OpenedEvent>, Error> open(const IpcHandleBytes& handle, int device);
  /** @brief Forgets every event; those still shared elsewhere close when their last user goes. */
  void clear() noexcept { events_.clear(); }
  /** @brief Events held. */
  std::size_t size() const noexcept { return events_.size(); }

 private:
  std::unordered_map<IpcHandleBytes, std::shared_ptr<OpenedEvent>, IpcHandleHash> events_;
};

}  // namespace holoscan::detail
