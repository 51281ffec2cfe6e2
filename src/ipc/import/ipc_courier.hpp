#pragma once
// The courier: one library thread that sends the Releases importers could not send at once
// because their exporter was not reading. It waits on those sockets (poll for room, 10 ms rounds
// to take up new ones), so that no user thread and not the release thread ever waits for a peer,
// and it keeps an outbox, and with it the socket, until the queue is empty or the exporter has
// hung up. Idle without outboxes; started with the first Importer. A forked child does not send
// what its parent queued (the parent does); its own importers start a courier there.
#include "holoscan/expected.hpp"
#include "ipc/import/ipc_outbox.hpp"

namespace holoscan::ipc::detail {

/** @brief Starts the courier thread if none runs (on the receiving side: it allocates). */
expected<void, Error> start_courier();

/** @brief Gives `outbox` to the courier until its queue is sent (no allocation, no waiting);
 *         call under the outbox's lock, with its CourierLink::hold set. */
HOLOSCAN_DLPACK_ABI void courier_take(Outbox& outbox) noexcept;

/** @brief Takes `outbox` out of the courier's list (its hold is the caller's to drop). Called by
 *         the courier's own flush, under the outbox's lock. */
HOLOSCAN_DLPACK_ABI void courier_drop(Outbox& outbox) noexcept;

}  // namespace holoscan::ipc::detail
