#pragma once
/**
 * @file
 * @brief The exporter's bookkeeping: one handle claim held per export until its importer is done.
 *
 * Every export holds a claim on its memory (so a pool cannot hand the block out again) until
 * the importer releases it and the importer's GPU work before that release has completed, or,
 * if the importer dies without releasing, until its process has exited. The GPU specifics come
 * in through two small interfaces, so this part is the same with or without a GPU.
 *
 * Each claim goes through these states, and only forward:
 * - held: added, not yet given back;
 * - released: the peer gave it back, once; with an event (dropped once the event completes),
 *   without one (dropped at the next poll()), or with an event this process cannot check
 *   (dropped only once the peer has exited: its GPU work may still read the memory);
 * - dropped: gone from the ledger.
 * A Release for a claim that is not held (unknown, another peer's, released already or dropped)
 * is a protocol error: it is counted in ignored_releases() and changes nothing. Export ids are
 * never reused, so a late Release cannot name a newer claim.
 *
 * Typical exporter loop:
 * @code
 * // The claim is the ExportedTensor itself (its handle claim keeps the block's memory, and its
 * // readiness event is not recorded again until the importer is done): never a copy of the
 * // caller's Tensor alone, whose memory reference a holder may replace.
 * auto held = std::make_shared<ExportedTensor>(std::move(*export_tensor(tensor, id)));
 * ledger.add(peer, id, [held]() mutable { held.reset(); });  // before the Publish is sent
 * channel.send(publish);                   // on failure: if (auto d = ledger.withdraw(...)) d();
 * // Release from the peer:  ledger.on_release(peer, r.export_id, event_from(r));
 * // End-of-file or exit:    ledger.on_peer_closed(peer, std::move(liveness_of_its_hello));
 * ledger.poll();                           // now and then; never blocks
 * @endcode
 */
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "holoscan/expected.hpp"
#include "holoscan/export.hpp"

namespace holoscan::ipc {

/** @brief Names one peer connection in the ledger; chosen by the caller, never reused. */
using PeerId = std::uint64_t;

/** @brief A point in the importer's GPU work after which it no longer touches the export. */
class HOLOSCAN_DLPACK_API ReleaseEvent {
 public:
  /** @brief Destroys the event (must not throw). */
  virtual ~ReleaseEvent() = default;
  /** @brief Whether the GPU has passed the point; never blocks. */
  virtual bool completed() noexcept = 0;
};

/** @brief Whether a peer process has exited, so that none of its GPU work can still run. */
class HOLOSCAN_DLPACK_API PeerLiveness {
 public:
  /** @brief Releases what watches the peer (must not throw). */
  virtual ~PeerLiveness() = default;
  /** @brief Whether the peer has exited; never blocks, and once true stays true. */
  virtual bool exited() noexcept = 0;
};

/** @brief Claims held for exports, keyed by (peer, export id); thread-safe, not movable. */
class HOLOSCAN_DLPACK_API ExportLedger {
 public:
  /** @brief Drops one claim; runs exactly once, on the thread that calls poll(), never throws. */
  using DropClaim = std::function<void()>;

  /** @brief An empty ledger. */
  ExportLedger();
  ExportLedger(const ExportLedger&) = delete;
  ExportLedger& operator=(const ExportLedger&) = delete;
  /**
   * @brief Drops every claim still held, without waiting for anyone.
   *
   * Destroy the ledger only once every peer has gone: a claim dropped here may free memory that
   * a live importer still reads.
   */
  ~ExportLedger();

  /**
   * @brief Holds `drop` for `export_id` published to `peer`, until the peer is done with it.
   *
   * Call before the Publish is sent, so that an early Release finds the claim. Refused with
   * kInvalidArgument for an export id already held for that peer, or a peer already closed; then
   * `drop` runs before the call returns, so that a refused export leaks nothing.
   */
  expected<void, Error> add(PeerId peer, std::uint64_t export_id, DropClaim drop);

  /**
   * @brief The peer gave `export_id` back; its claim drops once `event` completes (null: at once).
   *
   * A release for an export this peer does not hold (unknown, another peer's, or already
   * released) changes nothing, is counted in ignored_releases() and returns false.
   */
  bool on_release(PeerId peer, std::uint64_t export_id,
                  std::unique_ptr<ReleaseEvent> event) noexcept;

  /**
   * @brief The peer gave `export_id` back with an event this process cannot open or query, so
   *        its GPU work on the export is not known to be done: the claim counts as released (a
   *        later release for it is ignored) and drops only once the peer has exited.
   *
   * Returns false, changing nothing, for an export the peer does not hold (as on_release()).
   */
  bool on_uncheckable_release(PeerId peer, std::uint64_t export_id) noexcept;

  /**
   * @brief Takes back a claim whose Publish never reached the peer (its send failed): it leaves
   *        the ledger now and is returned, for the caller to run where it holds no lock.
   *
   * Returns an empty DropClaim, changing nothing, for a claim the peer does not hold or released.
   */
  DropClaim withdraw(PeerId peer, std::uint64_t export_id) noexcept;

  /**
   * @brief The peer will release nothing more (its channel hung up, or its process exited).
   *        Returns its claims still held.
   *
   * A claim the peer released drops once its event completes; a claim it never released (or
   * released uncheckably) drops once `liveness` reports the peer exited (its GPU context is gone
   * then, and with it every mapping and any work that could touch the memory), never at the
   * hang-up alone. An exited peer's pending release events are not waited for either: work of a
   * dead context never completes. A null `liveness` says the peer is known to be gone already.
   * Watch the process that maps the memory (the Hello's pidfd, see watch_pidfd), opened when the
   * peer connects, so that it cannot name another process that reused the pid.
   */
  std::size_t on_peer_closed(PeerId peer, std::unique_ptr<PeerLiveness> liveness) noexcept;

  /** @brief Drops every claim whose time has come; never blocks on the GPU. Returns how many. */
  std::size_t poll();

  /** @brief Claims held for every peer. */
  std::size_t held() const noexcept;
  /** @brief Claims held for `peer`. */
  std::size_t held(PeerId peer) const noexcept;
  /** @brief Releases that named no claim of their peer (unknown or duplicate export ids). */
  std::uint64_t ignored_releases() const noexcept;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace holoscan::ipc
