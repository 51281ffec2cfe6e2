#include "support/ipc_fakes.hpp"

namespace holoscan::test {
namespace {

class FakeEvent final : public ipc::ReleaseEvent {
 public:
  explicit FakeEvent(Flag completed) : completed_(std::move(completed)) {}
  bool completed() noexcept override { return completed_->load(); }

 private:
  Flag completed_;
};

class FakeLiveness final : public ipc::PeerLiveness {
 public:
  explicit FakeLiveness(Flag exited) : exited_(std::move(exited)) {}
  bool exited() noexcept override { return exited_->load(); }

 private:
  Flag exited_;
};

}  // namespace

Flag make_flag() { return std::make_shared<std::atomic<bool>>(false); }

std::unique_ptr<ipc::ReleaseEvent> fake_event(Flag completed) {
  return std::make_unique<FakeEvent>(std::move(completed));
}

std::unique_ptr<ipc::PeerLiveness> fake_liveness(Flag exited) {
  return std::make_unique<FakeLiveness>(std::move(exited));
}

}  // namespace holoscan::test
