#pragma once
/**
 * @file
 * @brief The exporting side of cross-process tensors: a tensor described for another process
 *        (export_tensor), and an Exporter that publishes tensors to connected importers and
 *        holds each one's memory until its importer is done with it.
 */
#include <cstddef>
#include <cstdint>
#include <memory>

#include "holoscan/cuda_handles.hpp"
#include "holoscan/expected.hpp"
#include "holoscan/export.hpp"
#include "holoscan/ipc/channel.hpp"
#include "holoscan/ipc/claims.hpp"
#include "holoscan/ipc/descriptor.hpp"
#include "holoscan/tensor.hpp"

namespace holoscan::ipc {

/**
 * @brief A tensor described for another process, and what its exporter keeps meanwhile.
 *
 * Holds one handle claim on the tensor's memory reference (so a pool cannot hand the block out
 * again) and the interprocess readiness event the importer waits on. Destroy it only once
 * the importer has released the export and the release's event has completed: then the claim
 * drops and the event goes back to its pool. Move-only.
 */
class HOLOSCAN_DLPACK_API ExportedTensor {
 public:
  struct State;  ///< The descriptor, the memory's fd, the claim and the readiness event.

  /** @brief Built by export_tensor(). */
  explicit ExportedTensor(std::unique_ptr<State> state) noexcept;
  /** @brief Takes `other`'s export; `other` is left empty. */
  ExportedTensor(ExportedTensor&& other) noexcept;
  /** @brief Drops this export's claim, then takes `other`'s. */
  ExportedTensor& operator=(ExportedTensor&& other) noexcept;
  ExportedTensor(const ExportedTensor&) = delete;
  ExportedTensor& operator=(const ExportedTensor&) = delete;
  /** @brief Drops the claim and returns the readiness event to its pool. */
  ~ExportedTensor();

  /** @brief What to send: encode() it, or hand it to Channel::send in a Publish (moved from:
   *         an empty descriptor, export id 0, which no import takes). */
  const TensorDescriptor& descriptor() const noexcept;
  /**
   * @brief For kPosixFd, the descriptor to pass beside the bytes (SCM_RIGHTS), owned by this
   *        object (a shareable pool's own fd, lent); -1 for kCudaIpc and when moved from.
   */
  int fd() const noexcept;
  /** @brief The CUDA device (this process's ordinal) the memory lives on; -1 when moved from. */
  int device() const noexcept;

 private:
  std::unique_ptr<State> state_;
};

/**
 * @brief Describes `tensor` for another process as export `export_id`.
 *
 * The memory: a shareable TensorPool's block (kPosixFd, the pool's VMM fd), a cudaMalloc pool's
 * block (kCudaIpc), or any other cudaMalloc allocation (kCudaIpc) or VMM allocation created with
 * the POSIX fd handle type (kPosixFd, a fresh fd). The readiness: when the tensor has a readiness
 * contract, an interprocess event recorded now on its readiness stream (the producer's work so
 * far); without one the descriptor carries no event and the importer sees no readiness contract.
 * The device travels by UUID. Never blocks.
 *
 * Refused with kInvalidArgument naming the memory: an empty tensor, host memory (pageable or
 * pinned), managed memory, device memory CUDA cannot share; also a tensor of more than 32
 * dimensions (the descriptor's limit) and a view written by hand with dimensions and no shape;
 * kNotImplemented for
 * stream-ordered pool memory (cudaMallocAsync). A CUDA failure is kFailure naming the call.
 */
HOLOSCAN_DLPACK_API expected<ExportedTensor, Error> export_tensor(const Tensor& tensor,
                                                                  std::uint64_t export_id);

/**
 * @brief As above, with the readiness event recorded on `stream` after the tensor's readiness
 *        point (one cudaStreamWaitEvent when `stream` is not the producer's stream).
 */
HOLOSCAN_DLPACK_API expected<ExportedTensor, Error> export_tensor(const Tensor& tensor,
                                                                  std::uint64_t export_id,
                                                                  cudaStream_t stream);

/** @brief Counters of an Exporter. */
struct HOLOSCAN_DLPACK_API ExporterStats {
  std::uint64_t published = 0;          ///< Exports sent.
  std::uint64_t releases = 0;           ///< Release messages received.
  std::uint64_t dropped = 0;            ///< Claims dropped (released and done, or peer exited).
  std::uint64_t ignored_releases = 0;   ///< Releases naming no claim of their peer.
  std::uint64_t refused_messages = 0;   ///< Frames refused, or messages an importer never sends.
  std::uint64_t unopenable_events = 0;  ///< Release events that could not be opened.
  std::uint64_t fds_sent = 0;           ///< Publishes that carried their memory's fd.
  std::uint64_t refused_exports = 0;    ///< Exports a peer refused (given back unimported).
};

/**
 * @brief Publishes tensors to importers in other processes and holds each export's memory until
 *        its importer is done with it, or has died. Thread-safe; never blocks the host on the GPU.
 *
 * Each publish sends the descriptor and keeps one handle claim in the ledger. A shareable pool's
 * allocation goes with its fd only the first time a peer connection sees it (the peer keeps
 * the mapping; a refused export makes the next one carry the fd again); other fd memory always
 * goes with its fd. The importer's Release carries an interprocess event recorded after its GPU
 * work on the tensor; poll() queries those events (cudaEventQuery, never a wait) and drops a claim
 * once its event has completed. Each peer's claims follow the process that proved itself in its
 * Hello (its pidfd), the one that maps the memory, whoever made the socket: once that process has
 * exited they all drop, since its GPU work dies with its context, and not before, even when its
 * socket hung up.
 *
 * Call poll() when fd() is readable, and every few hundred microseconds while held() is not zero
 * (completing events make no fd readable). A claim's drop may run a producer's deleter, with no
 * lock held: it may call the exporter, but must not destroy the exporter whose poll() ran it (the
 * destruction would wait for that poll() to return).
 *
 * Destroying an Exporter (or assigning over it) while other threads are in its calls wakes them
 * and waits until they return: an add_peer() waiting for its Hello returns kClosed ("the exporter
 * is being destroyed") at once, and so do calls that look after the destruction began. A call
 * must not start once the destructor may have returned (the caller's error, as for any object),
 * nor may an Exporter with calls under way be moved from. A poll() under way may be running a
 * producer's deleter: do not destroy the Exporter while holding a lock that such a deleter takes,
 * nor from such a deleter.
 */
class HOLOSCAN_DLPACK_API Exporter {
 public:
  /** @brief An exporter with no peers. */
  static expected<Exporter, Error> create();
  /** @brief Takes `other`'s peers and claims; `other` is left empty (its calls fail with
   *         kInvalidArgument, fd() is -1, it holds nothing). */
  Exporter(Exporter&& other) noexcept;
  /** @brief Destroys this exporter's state (as the destructor does), then takes `other`'s. */
  Exporter& operator=(Exporter&& other) noexcept;
  Exporter(const Exporter&) = delete;
  Exporter& operator=(const Exporter&) = delete;
  /**
   * @brief Ends the calls under way on other threads (see the class), then closes every channel.
   *        Claims of peers that are gone drop now; memory a live peer may still read is never
   *        freed: its claims are kept until the process exits. Poll until held() is zero first to
   *        avoid keeping it.
   */
  ~Exporter();

  /**
   * @brief Takes a connected channel, exchanges Hello (waiting up to `hello_timeout_ms`) and
   *        starts watching the process that sent the peer's Hello. kIncompatible for another
   *        protocol version or a peer that is an Exporter too, kPermissionDenied for a Hello
   *        that does not prove its sender.
   */
  expected<PeerId, Error> add_peer(Channel channel, int hello_timeout_ms = 5000);

  /**
   * @brief Exports `tensor` to `peer` (see export_tensor) and returns the export id.
   *
   * Never waits: kNotReady when the peer's socket is full (poll(), then retry), kClosed once the
   * peer hung up, kNotFound for an unknown peer, or export_tensor's refusal. The tensor's
   * TensorMemoryReference hooks run under this Exporter's lock: they must not call it back.
   */
  expected<std::uint64_t, Error> publish(PeerId peer, const Tensor& tensor);
  /** @brief As above, with the readiness event recorded on `stream` (see export_tensor). */
  expected<std::uint64_t, Error> publish(PeerId peer, const Tensor& tensor, cudaStream_t stream);

  /**
   * @brief Reads every message waiting, notes end-of-file, and drops the claims whose time has
   *        come. Never blocks. Returns how many claims it dropped.
   */
  expected<std::size_t, Error> poll();

  /** @brief An epoll descriptor, readable when a peer sent something or its process exited (for
   *         poll()/epoll loops). */
  int fd() const noexcept;
  /** @brief Claims held for every peer. */
  std::size_t held() const noexcept;
  /** @brief Claims held for `peer`. */
  std::size_t held(PeerId peer) const noexcept;
  /** @brief Whether `peer` is connected (added, not yet seen to hang up, its process running). */
  bool connected(PeerId peer) const noexcept;
  /** @brief The counters so far. */
  ExporterStats stats() const noexcept;

 private:
  struct State;  // peers, ledger, epoll descriptor and counters
  explicit Exporter(std::unique_ptr<State> state) noexcept;
  expected<std::uint64_t, Error> publish_on(PeerId peer, const Tensor& tensor,
                                            const cudaStream_t* stream);
  std::unique_ptr<State> state_;
};

}  // namespace holoscan::ipc
