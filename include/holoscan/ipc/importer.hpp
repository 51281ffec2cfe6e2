#pragma once
/**
 * @file
 * @brief The importing side of cross-process tensors: an Importer receives published tensors
 *        from one exporter, maps their memory once per allocation, and gives each back when
 *        its last owner goes, ordered after every consumer stream, without a host block.
 */
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include "holoscan/expected.hpp"
#include "holoscan/export.hpp"
#include "holoscan/ipc/channel.hpp"
#include "holoscan/ipc/descriptor.hpp"
#include "holoscan/ipc/fd.hpp"
#include "holoscan/tensor.hpp"

namespace holoscan::ipc {

namespace detail {
class HOLOSCAN_DLPACK_ABI ImporterCore;
class UnreadyImports;  ///< The imports a kOnHost Importer holds for their readiness (internal).
}  // namespace detail

class HOLOSCAN_DLPACK_API Importer;

/**
 * @brief Imports one descriptor that `peer`'s exporter published, with its memory's `fd`.
 *
 * Maps the memory (cudaIpcOpenMemHandle for kCudaIpc; cuMemImportFromShareableHandle, reserve,
 * map and set access for kPosixFd), reusing the mapping cached for the allocation, on the device
 * whose UUID the descriptor names. A kPosixFd descriptor with a nonzero allocation id may come
 * without `fd` when that allocation is mapped here already.
 *
 * Each export is imported once per connection (receive() imports each Publish once): a
 * descriptor with export id 0, naming another exporter process than the Hello's, an export
 * imported here and not yet given back, one given back or refused already, or one at or below
 * the highest export the channel carried (out of the exporter's order) is refused with
 * kInvalidArgument and nothing is given back (a Release would end the exporter's claim under the
 * import that holds it, or another export's). Exports imported here ahead of their Publish are
 * remembered when they finish (the last 256 one by one, older ones as a floor: see
 * docs/ipc.md). On any other refusal the export is given back to
 * the exporter at once (a Release without event): kInvalidArgument for a descriptor that fails
 * validation or whose handle kind and fd disagree (kPosixFd without fd for an allocation not
 * mapped here, kCudaIpc with one, which is closed); kNotImplemented for kFake handles; kNotFound
 * for a device UUID this process does not see; kFailure naming the call that failed to map;
 * kResourceExhausted out of host memory.
 */
HOLOSCAN_DLPACK_API expected<Tensor, Error> import_tensor(const TensorDescriptor& descriptor,
                                                          UniqueFd fd, Importer& peer);

/** @brief Counters of an Importer. */
struct HOLOSCAN_DLPACK_API ImporterStats {
  std::uint64_t imported = 0;         ///< Tensors imported.
  std::uint64_t refused = 0;  ///< Imports refused (given back at once unless repeats: see above).
  std::uint64_t released = 0;         ///< Releases queued for the exporter.
  std::uint64_t release_events = 0;   ///< Releases that carried a GPU event (the rest were done).
  std::uint64_t mappings_opened = 0;  ///< Allocations mapped into this process.
  std::uint64_t fds_received = 0;     ///< Imports whose memory's fd came with them.
  std::uint64_t held_for_readiness = 0;  ///< Imports receive() held until their readiness
                                         ///< event completed (ReadinessWait::kOnHost).
};

/** @brief Where the wait for an exporter's readiness event happens. */
enum class ReadinessWait {
  /**
   * @brief On the consumers' streams: receive() returns an import at once, with a readiness
   *        contract (synchronize_for_consumer is one cudaStreamWaitEvent on the exporter's event).
   *        The lower single-tensor latency without MPS, but a consumer stream that waits on the
   *        event of an exporter killed before the event's work ran never runs again (CUDA;
   *        `holoscan_dlpack_ipc_dead_event_probe`), and without MPS such waits across contexts
   *        hold up the GPU's turns between processes in a pipeline (docs/ipc.md).
   */
  kOnGpu,
  /**
   * @brief On this host: receive() holds an import back, in publish order, until a query
   *        (cudaEventQuery, never a blocking wait) finds its readiness event completed, and
   *        returns it with its readiness contract met: synchronize_for_consumer makes no stream
   *        wait, synchronize_for_host returns at once (consumer code needs no change). No
   *        consumer stream ever waits on another process, so an exporter that dies mid-work
   *        stalls nothing here: its imports still held are given back once its process has
   *        exited. The default: as fast or faster in a pipeline, with or without MPS
   *        (docs/ipc.md), at the cost of polling while an import is held.
   */
  kOnHost,
};

/** @brief Imports a ReadinessWait::kOnHost Importer holds at most: past it, receive() leaves the
 *         socket unread (the exporter's sends wait) until the oldest is ready. */
inline constexpr std::size_t kMaxHeldForReadiness = 1024;

/** @brief How an Importer connects and waits. */
struct HOLOSCAN_DLPACK_API ImporterOptions {
  int hello_timeout_ms = 5000;                      ///< Limit for the Hello exchange.
  ReadinessWait readiness = ReadinessWait::kOnHost;  ///< Where readiness is waited for.
};

/**
 * @brief Imports the tensors one exporter publishes over a channel.
 *
 * Imported tensors are Holoscan-owned and read-only, as Holoscan 5.0 imports them: their memory
 * reference has a readiness contract through the exporter's interprocess event, met before
 * receive() returns them by default (ReadinessWait::kOnHost; with kOnGpu synchronize_for_consumer
 * is one cudaStreamWaitEvent on it, synchronize_for_host a host wait), readiness_stream() is null
 * (streams are process-local) and set_readiness_stream() returns false.
 * set_deallocation_stream() records fan-out points as for any tensor. When the last owner goes,
 * an internal stream waits on every deallocation point and records an interprocess event there,
 * and the Release carrying it goes to the exporter at once: no host block on either side. Nothing
 * on the caller's thread or the release thread waits for the exporter: a Release that finds the
 * socket full is queued, in room set aside when its Publish arrived (giving an import back never
 * allocates), and a library thread (the courier) sends it as soon as the exporter reads again,
 * also after the Importer and every import are gone; none is dropped while the exporter is
 * connected.
 *
 * Each allocation is mapped once per exporter and kept while the exporter is connected (up to a
 * bound of idle mappings); memory whose exporter gives no allocation id is mapped per import and
 * unmapped after the consumers' GPU work on it. Imports may outlive the Importer: the channel
 * stays open until the last of them has been released and its Release sent, but it takes no more
 * Publishes: those never received are given back at once, as refused, and the exporter's later
 * publishes fail with kClosed. Methods may be called from any thread, receive() from one thread
 * at a time (a second one beside it is refused at once, kInvalidArgument). Destroying an Importer
 * (or assigning over it) while other threads are in its calls wakes them and waits until they
 * return: a receive() asleep on the socket or holding imports for their readiness returns kClosed
 * ("the importer is being destroyed") at once, so this is how another thread ends a receive(-1). A
 * call must not start once the destructor may have returned (the caller's error, as for any
 * object), nor may an Importer with calls under way be moved from. Do not destroy it from a
 * producer's deleter: the release thread would wait for a receive() that may itself be waiting for
 * that thread (a drop past the release backlog limit).
 */
class HOLOSCAN_DLPACK_API Importer {
 public:
  /** @brief Takes a connected channel and exchanges Hello (waiting up to `hello_timeout_ms`);
   *         kIncompatible for another protocol version or a peer that is an Importer too. */
  static expected<Importer, Error> create(Channel channel, int hello_timeout_ms = 5000);
  /** @brief As above, with `options` (the Hello's limit and where readiness is waited for). */
  static expected<Importer, Error> create(Channel channel, const ImporterOptions& options);
  /** @brief Takes `other`'s connection; `other` is left empty (its calls and import_tensor()
   *         with it fail with kInvalidArgument, fd() is -1, it holds nothing). */
  Importer(Importer&& other) noexcept;
  /** @brief Lets go of this connection (see the destructor), then takes `other`'s. */
  Importer& operator=(Importer&& other) noexcept;
  Importer(const Importer&) = delete;
  Importer& operator=(const Importer&) = delete;
  /** @brief Lets go of the connection: gives back the Publishes never received and takes no
   *         more; it closes once every import has been released and every Release sent. Waits
   *         only for calls under way on other threads, which it ends (see the class). */
  ~Importer();

  /**
   * @brief The next published tensor, or nullopt when none arrived within `timeout_ms`
   *        (negative: wait). Sends queued releases first.
   *
   * A publish that cannot be imported is given back to the exporter at once and reported here,
   * unless it repeats an export seen on this connection (see import_tensor); the importer stays
   * usable. kClosed once the exporter hung up or its process exited (what it sent before is read
   * first), also while another process holds its end of the socket.
   *
   * With ReadinessWait::kOnHost, the import returned is the oldest one held whose readiness event
   * completed; while one is held this call polls (every few tens of microseconds) until
   * `timeout_ms`, and `timeout_ms` 0 reads one more Publish at most (after the exporter's exit
   * with nothing held: what it queued, up to the first ready import or kClosed). Past
   * kMaxHeldForReadiness imports held the socket is left unread (the exporter's sends wait) until
   * the oldest is ready. An event that cannot be asked (a broken context) gives its import back and
   * returns that error (kFailure naming cudaEventQuery). After a hang-up, imports held are still
   * returned as their events complete; once the exporter's process has exited, those whose events
   * did not complete are given back (they never will), the others still returned in order, and
   * kClosed follows.
   */
  expected<std::optional<Tensor>, Error> receive(int timeout_ms);

  /**
   * @brief Stops receiving now, from any thread, and returns at once: a receive() under way
   *        returns kClosed ("the importer was stopped"), and so does every later receive(),
   *        poll() and import_tensor(); the socket stops receiving, so that the exporter's later
   *        publishes fail with kClosed. A receive() that read a Publish before the stop still
   *        returns its import; one read after it is given back. Received imports stay valid;
   *        what is still queued is given back when the Importer is destroyed. Idempotent.
   */
  void stop() noexcept;

  /** @brief Sends the releases that found the socket full, as far as there is room now (the
   *         courier sends them anyway); never blocks. kClosed once the exporter hung up or its
   *         process exited (the releases are dropped then: the exporter frees its claims itself).
   */
  expected<void, Error> poll();

  /** @brief The channel's socket, for poll()/epoll loops (readable: receive() will not wait). It
   *         shows the exporter's hang-up, not its exit while another process holds its end:
   *         receive() and poll() see that. An import held for its readiness (kOnHost) makes it
   *         readable neither: see awaiting_readiness(). */
  int fd() const noexcept;
  /**
   * @brief Imports receive() holds for their readiness now (ReadinessWait::kOnHost; always 0
   *        otherwise). A completing event wakes no descriptor: while this is not zero, an event
   *        loop calls receive(0) every few tens of microseconds besides waiting on fd().
   */
  std::size_t awaiting_readiness() const noexcept;
  /** @brief Imports not yet given back. */
  std::size_t outstanding() const noexcept;
  /** @brief Releases waiting for room in the socket. */
  std::size_t queued_releases() const noexcept;
  /** @brief Allocations mapped and kept for reuse. */
  std::size_t cached_mappings() const noexcept;
  /** @brief The counters so far. */
  ImporterStats stats() const noexcept;

 private:
  Importer(std::shared_ptr<detail::ImporterCore> core,
           std::unique_ptr<detail::UnreadyImports> unready) noexcept;
  friend expected<Tensor, Error> import_tensor(const TensorDescriptor& descriptor, UniqueFd fd,
                                               Importer& peer);
  std::shared_ptr<detail::ImporterCore> core_;
  std::unique_ptr<detail::UnreadyImports> unready_;  // ReadinessWait::kOnHost only
};

}  // namespace holoscan::ipc
