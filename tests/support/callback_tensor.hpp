#pragma once
// A DLPack managed tensor whose deleter runs a test's callback: for deleters that re-enter the
// library, block on a lock or exit the process.
#include <dlpack/dlpack.h>

#include <functional>
#include <utility>

namespace holoscan::test {

/** @brief A data-less host tensor whose deleter frees it, then calls `on_delete` once. */
inline DLManagedTensorVersioned* make_callback_tensor(std::function<void()> on_delete) {
  struct Holder {
    DLManagedTensorVersioned managed{};
    std::function<void()> on_delete;
  };
  auto* holder = new Holder{{}, std::move(on_delete)};
  holder->managed.version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
  holder->managed.manager_ctx = holder;
  holder->managed.dl_tensor.device = {kDLCPU, 0};
  holder->managed.dl_tensor.dtype = {kDLFloat, 32, 1};
  holder->managed.deleter = [](DLManagedTensorVersioned* self) {
    auto* owner = static_cast<Holder*>(self->manager_ctx);
    // Freed first: a callback that never returns (exit, a blocked lock) leaks nothing.
    std::function<void()> callback = std::move(owner->on_delete);
    delete owner;
    callback();
  };
  return &holder->managed;
}

}  // namespace holoscan::test
