#pragma once
// Stand-ins for the GPU side of the export ledger: release events and peer liveness that a test
// switches by hand.
#include <atomic>
#include <memory>

#include "holoscan/ipc/claims.hpp"

namespace holoscan::test {

/** @brief A switch that a test flips and a fake reads, shared so either may outlive the other. */
using Flag = std::shared_ptr<std::atomic<bool>>;

/** @brief A new switch, off. */
Flag make_flag();

/** @brief A ReleaseEvent that completes when its flag is set. */
std::unique_ptr<ipc::ReleaseEvent> fake_event(Flag completed);

/** @brief A PeerLiveness that reports exit when its flag is set. */
std::unique_ptr<ipc::PeerLiveness> fake_liveness(Flag exited);

}  // namespace holoscan::test
