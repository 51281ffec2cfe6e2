#pragma once
// A DLPack managed tensor whose deleter runs a test's callback: for deleters that re-enter the
// library, block on a lock or exit the process.
#include <dlpack/dlpack.h>

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

namespace holoscan::test {

/**
 * @brief A host tensor whose deleter frees it, then calls `on_delete` once: data-less (float32,
 *        no dimensions), or with `bytes` of uint8 data in one dimension.
 */
inline DLManagedTensorVersioned* make_callback_tensor(std::function<void()> on_delete,
                                                      std::int64_t bytes = 0) {
  struct Holder {
    DLManagedTensorVersioned managed{};
    std::function<void()> on_delete;
    std::int64_t shape[1] = {0};
    std::vector<std::uint8_t> data;
  };
  auto* holder = new Holder{{}, std::move(on_delete), {bytes}, {}};
  holder->managed.version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
  holder->managed.manager_ctx = holder;
  DLTensor& view = holder->managed.dl_tensor;
  view.device = {kDLCPU, 0};
  view.dtype = {kDLFloat, 32, 1};
  if (bytes > 0) {
    holder->data.assign(static_cast<std::size_t>(bytes), 7);
    view.data = holder->data.data();
    view.ndim = 1;
    view.shape = holder->shape;
    view.dtype = {kDLUInt, 8, 1};
  }
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
