#pragma once
// What an Importer and every tensor it imported share: the outbox (the channel to the exporter and
// the Releases waiting for room in it), the mappings and opened readiness events of that
// exporter, and the devices by UUID. It lives until the Importer and the last import are gone;
// Releases still queued then stay with the courier (ipc_outbox.hpp) until they are sent.
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "calls_under_way.hpp"
#include "holoscan/expected.hpp"
#include "holoscan/export.hpp"
#include "holoscan/ipc/channel.hpp"
#include "holoscan/ipc/importer.hpp"
#include "ipc/cuda/ipc_opened_event.hpp"
#include "ipc/import/ipc_admissions.hpp"
#include "ipc/import/ipc_mapping.hpp"
#include "ipc/import/ipc_outbox.hpp"
#include "ipc/import/ipc_release_stream.hpp"
#include "stream/stream_point_list.hpp"

namespace holoscan::ipc::detail {

/** @brief The shared state of one importer connection; every method is thread-safe. */
class HOLOSCAN_DLPACK_ABI ImporterCore {
 public:
  /** @brief Shares `outbox`, whose Hello came from process `exporter_pid` (as it sees itself). */
  ImporterCore(std::shared_ptr<Outbox> outbox, std::uint32_t exporter_pid) noexcept
      : outbox_(std::move(outbox)),
        exporter_pid_(exporter_pid),
        owner_(::getpid()),
        release_rings_(outbox_->exporter_fd()) {}
  /** @brief Never waits: Releases still queued stay with the courier until they are sent. */
  ~ImporterCore() = default;
  ImporterCore(const ImporterCore&) = delete;
  ImporterCore& operator=(const ImporterCore&) = delete;

  /** @brief The channel's socket. */
  int fd() const noexcept { return outbox_->fd(); }
  /** @brief The exporter's pidfd (readable once its process exited), or -1. */
  int exporter_fd() const noexcept { return outbox_->exporter_fd(); }

  /**
   * @brief The next message if one is queued now (never waits); flushes releases first. Room for
   *        the Release of a Publish read is set aside; a Publish the channel refused is given
   *        back here.
   */
  expected<std::optional<Message>, Error> receive_now();
  /** @brief Sets room aside for the Release of an import not read by receive_now(); false
   *         when there was no memory for it (the Release allocates when it comes). */
  bool promise_release() noexcept;

  /** @brief This process's device whose UUID is `uuid`; kNotFound when there is none. */
  expected<int, Error> device_of(const std::array<std::uint8_t, 16>& uuid);
  /** @brief The mapping of `descriptor`'s allocation (cached per allocation id; whose word it
   *         rests on: MappingCache::get). */
  expected<std::shared_ptr<ImportedMapping>, Error> mapping(const TensorDescriptor& descriptor,
                                                            UniqueFd fd, int device,
                                                            bool from_channel);
  /** @brief The exporter's readiness event `handle`, opened once. */
  expected<std::shared_ptr<holoscan::detail::OpenedEvent>, Error> readiness_event(
      const holoscan::detail::IpcHandleBytes& handle, int device);

  /**
   * @brief Takes `descriptor`'s export as this connection's to import, before anything is mapped:
   *        each export is imported once (see ipc_admissions.hpp). `from_channel`: its Publish
   *        was read from the channel (so its id is in the exporter's publish order).
   *
   * Refused with kInvalidArgument, and nothing given back (the export is not this import's to
   * give: a Release for it would end the exporter's claim under the import that holds it), when
   * the descriptor names export id 0, another exporter process, an export imported here already,
   * or one given back, refused or out of the channel's order; the room `promised` for its
   * Release is withdrawn. Out of memory it is refused with kResourceExhausted and given back.
   * Never throws.
   */
  expected<void, Error> admit(const TensorDescriptor& descriptor, bool promised, bool from_channel);
  /**
   * @brief Refuses export `export_id` of a Publish the channel refused or that could not be
   *        decoded, after forgetting `forget_allocation`: as refuse() when it is new to this
   *        connection; a repeat of one seen is refused without a Release. Never waits.
   */
  void refuse_unread(std::uint64_t export_id, std::uint64_t fd_allocation,
                     std::uint64_t forget_allocation) noexcept;
  /** @brief refuse_unread() for a Publish read from the channel and not imported (the Importer
   *         stopped): its export is given back, its fd closed with it. Never waits. */
  void give_back_unread(const Publish& publish) noexcept;
  /** @brief Counts an import made. */
  void imported() noexcept;
  /** @brief Counts an import held back for its readiness (ReadinessWait::kOnHost). */
  void held_for_readiness() noexcept;
  /** @brief Counts a publish refused (its export is given back separately). */
  void refused() noexcept;
  /**
   * @brief Refuses export `export_id`: counts it, lets go of the mapping of `fd_allocation` (its
   *        kPosixFd allocation, or 0), as the exporter does when the refusal reaches it, and gives
   *        the export back as refused. A refusal of a caller's import (not `from_channel`) lets go
   *        only of a mapping the caller's imports made: the exporter sends the fd again only for
   *        its own exports, so the channel's mapping must stay. Never allocates; waits only for
   *        another thread's mapping (the CUDA lock), never for the exporter.
   */
  void refuse(std::uint64_t export_id, std::uint64_t fd_allocation, bool from_channel) noexcept;
  /**
   * @brief The Publish of export `export_id`, which a caller's import_tensor imported and gave
   *        back before it came: counted refused here, and given back again (an exporter that held
   *        no claim when the first Release came ignored it), but as an import ended, not as a
   *        refusal: the channel's mapping of its allocation stays, which a refused Release would
   *        have the exporter count as let go (one mapping fewer than this side keeps).
   */
  void give_back_finished_ahead(std::uint64_t export_id) noexcept;
  /** @brief The exporter no longer counts `allocation`'s fd as sent: its mapping is let go
   *         (imports keep theirs); 0 does nothing. `channels_too` false: see refuse(). */
  void forget(std::uint64_t allocation, bool channels_too = true) noexcept;

  /**
   * @brief Gives export `export_id` back: done once `event` (when not null) completes. Sends at
   *        once if the socket has room, else queues it (in room set aside when its Publish came)
   *        for the courier. Never waits, never allocates. `was_imported` says whether it ends an
   *        import (false for a refused publish).
   */
  void give_back(std::uint64_t export_id, const holoscan::detail::IpcHandleBytes* event,
                 bool was_imported) noexcept;
  /**
   * @brief Orders this connection's release stream of `device` after every point in `points`
   *        and records a release event there (ReleaseRings::record); never blocks on the GPU.
   */
  expected<std::array<std::uint8_t, kIpcHandleBytes>, Error> record_release(
      int device, const holoscan::detail::StreamPointList& points) noexcept {
    return release_rings_.record(device, points);
  }
  /** @brief The exporter hung up: forgets the mappings and events no import holds. */
  void forget_unused() noexcept;
  /**
   * @brief The Importer is going, its imports may live on: no Publish is taken any more. Its
   *        calls under way are told so, and the socket stops receiving (which wakes a receive()
   *        asleep on it; the exporter's later sends fail, and it withdraws their claims); once
   *        those calls have returned, each Publish still queued is given back as refused (its fd
   *        closed) and mappings no import holds are let go. Waits for nothing else. A child
   *        forked from the process that made it only tells its own calls (the socket is the
   *        parent's too).
   */
  void stop_receiving() noexcept;
  /** @brief stop_receiving()'s first half, for Importer::stop(): the calls under way are told
   *         and the socket stops receiving; nothing is waited for or given back (the destructor
   *         does that). */
  void stop() noexcept;
  /** @brief Whether stop() ran (a call ended for it says so). */
  bool stopped() const noexcept { return stopped_.load(); }
  /** @brief Set while the Importer's receive() runs (one at a time). */
  std::atomic<bool>& receiving() noexcept { return receiving_; }
  /** @brief Sends queued releases as far as the socket has room; never waits. */
  expected<void, Error> flush();

  /** @brief The Importer's public calls under way (each counts itself: CallUnderWay). */
  holoscan::detail::CallsUnderWay& calls() noexcept { return calls_; }

  /** @brief Imports not yet given back. */
  std::size_t outstanding() const noexcept;
  /** @brief Releases waiting for room in the socket. */
  std::size_t queued_releases() const noexcept;
  /** @brief Mappings cached. */
  std::size_t cached_mappings() const noexcept;
  /** @brief The counters so far. */
  ImporterStats stats() const noexcept;

 private:
  // The first step of stop() and stop_receiving(): the calls under way are told, and the socket
  // stops receiving unless this is a forked child's copy (false then).
  bool end_calls_and_shut_receiving() noexcept;
  // Why `descriptor` was not admitted (`foreign`: it names another exporter process).
  Error not_admitted(Admissions::Verdict verdict, bool foreign,
                     const TensorDescriptor& descriptor) const noexcept;
  expected<void, Error> find_devices_locked();

  // Two locks, so that giving an import back (a user's thread, the release thread) never waits
  // for another thread's driver calls: cuda_mutex_ guards what is opened through CUDA (mappings,
  // events, devices) and is held across those calls; books_mutex_ the admissions and counters.
  mutable std::mutex cuda_mutex_;
  mutable std::mutex books_mutex_;
  std::shared_ptr<Outbox> outbox_;  // thread-safe itself: used under neither lock
  MappingCache mappings_;
  holoscan::detail::OpenedEventCache readiness_events_;
  std::optional<std::vector<std::pair<std::array<std::uint8_t, 16>, int>>> devices_;
  const std::uint32_t exporter_pid_;
  // The process that made this connection: a child forked without exec shares its socket, and a
  // shutdown there would end the parent's receiving too.
  const pid_t owner_;
  Admissions admissions_;
  ImporterStats stats_;
  // Thread-safe itself, used under neither lock; after outbox_, whose pidfd it borrows.
  holoscan::detail::ReleaseRings release_rings_;
  holoscan::detail::CallsUnderWay
      calls_;  // the Importer's, kept here: its calls reach it through core_
  std::atomic<bool> stopped_{false};  // set before calls_ is told, read after a call sees it
  std::atomic<bool> receiving_{false};  // a receive() runs
};

/** @brief Counts a call on the Importer of `core` while it runs (null: one moved from). */
inline holoscan::detail::CallsUnderWay* calls_of(ImporterCore* core) noexcept {
  return core != nullptr ? &core->calls() : nullptr;
}

/**
 * @brief Imports `descriptor` for `core`, with room for the export's Release set aside when
 *        `promised` (see import_tensor), its Publish read from the channel when `from_channel`;
 *        a refusal after admission gives the export back at once.
 */
expected<Tensor, Error> import_promised(const std::shared_ptr<ImporterCore>& core,
                                        const TensorDescriptor& descriptor, UniqueFd fd,
                                        bool promised, bool from_channel);

/** @brief The refusal of a call on an Importer that was moved from (kInvalidArgument). */
Error importer_moved_from() noexcept;
/** @brief The end of a call on an Importer stopped, being destroyed or assigned over (kClosed). */
Error importer_ending(const ImporterCore& core) noexcept;

}  // namespace holoscan::ipc::detail
