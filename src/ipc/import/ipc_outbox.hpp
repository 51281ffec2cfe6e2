#pragma once
// The importer's end of its channel: messages are received here, and Releases are sent from here
// without ever waiting for the exporter. A Release that finds the socket full is queued in room
// set aside when its Publish arrived (on the receiving path, where allocating is fine), so giving
// an export back never allocates, never blocks and never throws, on whatever thread the import's
// last owner is dropped (a user's thread, the release thread). The queue is handed to the
// courier (ipc_courier.hpp), a library thread that sends it as the socket makes room, also after
// the Importer and every import are gone; nothing queued is dropped while the exporter is there.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "holoscan/expected.hpp"
#include "holoscan/ipc/channel.hpp"
#include "holoscan/ipc/message.hpp"

namespace holoscan::ipc::detail {

/** @brief One importer connection's channel and its queue of Releases; thread-safe. */
class HOLOSCAN_DLPACK_ABI Outbox : public std::enable_shared_from_this<Outbox> {
 public:
  /** @brief An outbox on `channel` (its Hello exchanged), whose exporter is the process of the
   *         pidfd `exporter` (the Hello's; may be empty); starts the courier if none runs. */
  static expected<std::shared_ptr<Outbox>, Error> create(Channel channel, UniqueFd exporter);
  /** @brief Use create(). */
  Outbox(Channel channel, UniqueFd exporter) noexcept
      : channel_(std::move(channel)), exporter_(std::move(exporter)) {}
  Outbox(const Outbox&) = delete;
  Outbox& operator=(const Outbox&) = delete;

  /** @brief The channel's socket. */
  int fd() const noexcept { return channel_.fd(); }
  /** @brief The exporter's pidfd, readable once that process exited; -1 when unknown. */
  int exporter_fd() const noexcept { return exporter_.get(); }

  /** @brief What receive_now() read. */
  struct Received {
    expected<std::optional<Message>, Error> message;  ///< As Channel::receive(0).
    std::optional<std::uint64_t>
        refused_export;  ///< A refused Publish to give back (its room set).
    std::uint64_t refused_fd_allocation = 0;  ///< Its allocation (Channel::refused_fd_allocation).
    std::uint64_t refused_forget = 0;  ///< Its forget_allocation, which holds all the same.
  };

  /**
   * @brief Sends what is queued, then reads the next message if one is there (never waits);
   *        kClosed once the exporter hung up or its process exited and nothing is left to read.
   *
   * Room for one Release is set aside before anything is read, and promised to the Publish
   * read, or refused with an export to give back (kResourceExhausted, nothing read, when there is
   * no memory for it).
   */
  Received receive_now();

  /** @brief Sets room aside for one more Release (allocates; for imports not made by
   *         receive_now()). kResourceExhausted when there is no memory for it. */
  expected<void, Error> promise();
  /** @brief Gives back room promised for a Release that will not be sent (an import refused
   *         without giving its export back). Never waits, never allocates. */
  void withdraw_promise() noexcept;

  /**
   * @brief Queues `release` in room promised before and sends what the socket takes now; the rest
   *        goes to the courier. Never waits and never throws; allocates only when no room was
   *        promised (then, out of memory, it tries a direct send and drops the Release if the
   *        socket is full: the exporter's claim then waits for this process to exit).
   */
  void send(const Release& release) noexcept;

  /** @brief Sends what is queued, as far as the socket has room; never waits. kClosed once the
   *         exporter hung up or its process exited (what was queued is dropped then: nobody is
   *         left to tell). */
  expected<void, Error> flush();

  /** @brief Releases queued for want of room in the socket. */
  std::size_t queued() const noexcept;

  /** @brief What the courier's flush found. */
  enum class Progress {
    kDone,        ///< Nothing left, or nobody to send to: the courier lets it go.
    kWaiting,     ///< The socket is full: wait for it to make room.
    kRetryLater,  ///< The socket refused for another reason: try again in a while.
  };
  /** @brief The courier's flush: on kDone the outbox leaves the courier. */
  Progress courier_flush() noexcept;

  /** @brief The courier's list through its outboxes; touched under the courier's lock only. */
  struct CourierLink {
    Outbox* next = nullptr;        ///< The next outbox the courier has.
    std::shared_ptr<Outbox> hold;  ///< Keeps this outbox alive while the courier has it.
  };
  /** @brief This outbox's place in the courier's list. */
  CourierLink& courier_link() noexcept { return link_; }

 private:
  // The queue: a ring in `slots_`, whose size only grows (on the receiving path).
  bool room_for(std::size_t more) const noexcept { return slots_.size() >= queued_ + more; }
  void grow(std::size_t more);
  void push(const Release& release) noexcept;
  // Sends from the front while the socket takes them: 0, or send_record_now()'s errno.
  int flush_locked() noexcept;
  void hand_to_courier_locked() noexcept;
  // Whether the exporter's process has exited. Its end of the socket may outlive it (another
  // process holding a copy, as a launcher that made the pair), so the socket alone never says so.
  bool exporter_exited() const noexcept;

  mutable std::mutex mutex_;
  Channel channel_;
  UniqueFd exporter_;
  std::vector<Release> slots_;
  std::size_t head_ = 0;
  std::size_t queued_ = 0;
  std::size_t promised_ = 0;  // room set aside for Releases not yet sent
  bool closed_ = false;       // the exporter hung up: nothing more is sent
  bool with_courier_ = false;
  CourierLink link_;
};

}  // namespace holoscan::ipc::detail
