#pragma once
// What an Importer and every tensor it imported share: the channel to the exporter, the queue of
// releases waiting for room in it, the mappings and opened readiness events of that exporter, and
// the devices by UUID. It lives until the Importer and the last import are gone.
#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "holoscan/detail/abi.hpp"
#include "holoscan/expected.hpp"
#include "holoscan/ipc_channel.hpp"
#include "holoscan/ipc_importer.hpp"
#include "ipc_mapping.hpp"
#include "ipc_opened_event.hpp"

namespace holoscan::ipc::detail {

/** @brief The shared state of one importer connection; every method is thread-safe. */
class HOLOSCAN_DLPACK_ABI ImporterCore {
 public:
  /** @brief Owns `channel` (its Hello exchanged already). */
  explicit ImporterCore(Channel channel) noexcept : channel_(std::move(channel)) {}
  /** @brief Sends what is still queued (for a bounded time), then closes the channel. */
  ~ImporterCore();
  ImporterCore(const ImporterCore&) = delete;
  ImporterCore& operator=(const ImporterCore&) = delete;

  /** @brief The channel's socket. */
  int fd() const noexcept { return channel_.fd(); }

  /** @brief The next message if one is queued now (never waits); flushes releases first. */
  expected<std::optional<Message>, Error> receive_now();

  /** @brief This process's device whose UUID is `uuid`; kNotFound when there is none. */
  expected<int, Error> device_of(const std::array<std::uint8_t, 16>& uuid);
  /** @brief The mapping of `descriptor`'s allocation (cached per allocation id). */
  expected<std::shared_ptr<ImportedMapping>, Error> mapping(const TensorDescriptor& descriptor,
                                                            UniqueFd fd, int device);
  /** @brief The exporter's readiness event `handle`, opened once. */
  expected<std::shared_ptr<holoscan::detail::OpenedEvent>, Error> readiness_event(
      const holoscan::detail::IpcHandleBytes& handle, int device);

  /** @brief Counts an import made. */
  void imported() noexcept;
  /** @brief Counts a publish refused (its export is given back separately). */
  void refused() noexcept;

  /**
   * @brief Gives export `export_id` back: done once `event` (when not null) completes. Sends at
   *        once if the socket has room, else queues it for the next send, receive or poll.
   *        `was_imported` says whether it ends an import (false for a refused publish).
   */
  void give_back(std::uint64_t export_id, const holoscan::detail::IpcHandleBytes* event,
                 bool was_imported) noexcept;
  /** @brief The exporter hung up: forgets the mappings and events no import holds. */
  void forget_unused() noexcept;
  /** @brief Sends queued releases, waiting up to `timeout_ms` for room (0: never waits). */
  expected<void, Error> flush(int timeout_ms);

  /** @brief Imports not yet given back. */
  std::size_t outstanding() const noexcept;
  /** @brief Releases waiting for room in the socket. */
  std::size_t queued_releases() const noexcept;
  /** @brief Mappings cached. */
  std::size_t cached_mappings() const noexcept;
  /** @brief The counters so far. */
  ImporterStats stats() const noexcept;

 private:
  expected<void, Error> flush_locked(int timeout_ms);
  expected<void, Error> find_devices_locked();

  mutable std::mutex mutex_;
  Channel channel_;
  std::deque<Release> outbox_;
  MappingCache mappings_;
  holoscan::detail::OpenedEventCache readiness_events_;
  std::optional<std::vector<std::pair<std::array<std::uint8_t, 16>, int>>> devices_;
  std::size_t outstanding_ = 0;
  ImporterStats stats_;
};

}  // namespace holoscan::ipc::detail
